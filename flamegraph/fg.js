/* SPDX-License-Identifier: MIT */
/*
 * pyrsprof flame graph interaction, embedded in every SVG by flamegraph/svg.c.
 * Each frame is <g class="f" data-x data-c data-d> with a <title> (first line: the name), a <rect>
 * and a <text>; offsets and counts are in samples. Conventions follow flamegraph.pl: click a frame
 * to zoom (its ancestors stay, faded, as context), click "Reset Zoom" or press Esc to reset,
 * Ctrl-F (or F3) to search by regular expression, Ctrl-I to toggle case, Esc to clear.
 * Text from the profile is only ever assigned with textContent: nothing is parsed as markup.
 *
 * Fitting the window. The file is written at a nominal width, which is what an <img> or
 * rsvg-convert shows (no script runs there). In a browser the script sets the width to the
 * window's (the root element's clientWidth: the viewport without its scroll bar), and again on
 * each resize:
 * frames are placed anew from their sample offsets, labels cut to the measured width of their
 * characters, the title bar and the legend flowed again. The page opens scrolled to the roots
 * (the bottom of a flame graph, the top of an icicle), where the widest frames are; the title bar
 * and the details line stay in view as the page scrolls; a zoom scrolls the zoomed frame to the
 * roots' end of the view, a reset scrolls back to the roots.
 */
(function () {
	"use strict";
	var doc = document, svg = doc.documentElement;
	var framesG = doc.getElementById("frames");
	var head = doc.getElementById("head"), foot = doc.getElementById("foot");
	var titleEl = doc.getElementById("title"), subtitleEl = doc.getElementById("subtitle");
	var details = doc.getElementById("details"), matchedEl = doc.getElementById("matched");
	var unzoomBtn = doc.getElementById("unzoom"), searchBtn = doc.getElementById("search");
	var icBtn = doc.getElementById("ignorecase"), legend = doc.getElementById("legend");
	var HIGHLIGHT = "rgb(230,0,230)", ELLIPSIS = "\u2026", XHTML = "http://www.w3.org/1999/xhtml";
	var MIN_WIDTH = 200, MAX_WIDTH = 100000; /* the writer's bounds */
	var num = function (el, name) { return Number(el.getAttribute(name)); };
	var total = num(framesG, "data-total") || 0;
	var xpad = num(framesG, "data-xpad"), frameh = num(framesG, "data-frameh");
	var icicle = framesG.getAttribute("data-icicle") === "1";
	var unit = framesG.getAttribute("data-unit") || "samples";
	var width = num(svg, "width"), height = num(svg, "height"), plotw = width - 2 * xpad;
	var headH = num(head.firstElementChild, "height");
	var footTop = num(foot.firstElementChild, "y");
	var footH = num(foot.firstElementChild, "height");
	var frames = [], zoomed = null, searchTerm = null, ignoreCase = false;
	var atRoots = true; /* the view shows the roots' end: kept there across resizes */
	var fitted = false; /* the first fit cuts every label anew, with measured widths */
	/* Measurers of the texts that are cut or flowed, made before the script changes anything
	 * (a computed style read after the frames moved would restyle every frame). */
	var fonts = null;

	function parseFrames() {
		var gs = framesG.getElementsByTagName("g");
		for (var i = 0; i < gs.length; i++) {
			var g = gs[i];
			if (!g.classList.contains("f")) continue;
			var title = g.getElementsByTagName("title")[0];
			var lines = title ? title.textContent.split("\n") : [""];
			var rect = g.getElementsByTagName("rect")[0];
			var text = g.getElementsByTagName("text")[0];
			frames.push({
				g: g, rect: rect, text: text, lines: lines, name: lines[0],
				merged: g.classList.contains("m"),
				x: Number(g.getAttribute("data-x")), c: Number(g.getAttribute("data-c")),
				d: Number(g.getAttribute("data-d")), fill: rect.getAttribute("fill"),
				y: Number(rect.getAttribute("y")), label: text.textContent,
				state: "", px: NaN, pw: NaN, tx: NaN, nw: -1
			});
			g.prsIndex = frames.length - 1;
		}
	}

	/*
	 * Width in px of text in el's font, from a canvas, cached per character. Each advance is
	 * rounded up to 1/64 px, the unit in which Chromium places SVG glyphs, so that a sum is
	 * never less than the drawn width (kerning only narrows). Without a canvas: the writer's
	 * estimate, 0.59 em a character.
	 */
	function measurer(el) {
		var cache = new Map(), cs = window.getComputedStyle(el), ctx = null;
		var em = parseFloat(cs.fontSize) || 12;
		try {
			ctx = doc.createElementNS(XHTML, "canvas").getContext("2d");
			ctx.font = [cs.fontStyle, cs.fontWeight, cs.fontSize, cs.fontFamily].join(" ");
		} catch (err) {
			ctx = null;
		}
		function advance(ch) {
			var w = cache.get(ch);
			if (w === undefined) {
				w = ctx ? Math.ceil(ctx.measureText(ch).width * 64) / 64 : 0.59 * em;
				cache.set(ch, w);
			}
			return w;
		}
		return {
			advance: advance,
			width: function (s) {
				var w = 0;
				for (var ch of s) w += advance(ch);
				return w;
			}
		};
	}

	/*
	 * s cut to fit room px (its width, sw, when known): whole, or its longest prefix that fits
	 * with an ellipsis after it, or "" when not even one character does.
	 */
	function clip(m, s, room, sw) {
		if ((sw === undefined ? m.width(s) : sw) <= room) return s;
		var left = room - m.advance(ELLIPSIS), out = "";
		for (var ch of s) {
			left -= m.advance(ch);
			if (left < 0) break;
			out += ch;
		}
		return out ? out + ELLIPSIS : "";
	}

	/*
	 * The rect through its SVG DOM lengths (no number formatting: 4x faster than setAttribute
	 * on a 33,000-frame graph); the text only when it has a label, as most frames of a big graph
	 * are too narrow for one.
	 */
	function place(f, x, w) {
		if (x !== f.px) f.rect.x.baseVal.value = f.px = x;
		if (w !== f.pw) f.rect.width.baseVal.value = f.pw = w;
		var label = "";
		if (w > 6) { /* 3 px each side */
			if (f.nw < 0) f.nw = fonts.frame.width(f.name);
			label = clip(fonts.frame, f.name, w - 6, f.nw);
		}
		if (label !== f.label) {
			f.text.textContent = label;
			f.label = label;
		}
		if (label && x !== f.tx) {
			f.text.setAttribute("x", (x + 3).toFixed(2));
			f.tx = x;
		}
	}

	function setState(f, state) {
		if (state === f.state) return;
		if (f.state) f.g.classList.remove(f.state);
		if (state) f.g.classList.add(state);
		f.state = state;
	}

	/* Places the frames for the zoom and the plot width; frames outside the zoom are hidden. */
	function layout() {
		var z = zoomed || { x: 0, c: total, d: 0 }, k = plotw / (z.c || 1);
		for (var i = 0; i < frames.length; i++) {
			var e = frames[i];
			if (e.d >= z.d && e.x >= z.x && e.x + e.c <= z.x + z.c) {
				setState(e, "");
				place(e, xpad + (e.x - z.x) * k, e.c * k);
			} else if (e.d < z.d && e.x <= z.x && e.x + e.c >= z.x + z.c) {
				setState(e, "parent");
				place(e, xpad, plotw);
			} else {
				setState(e, "hide");
			}
		}
	}

	/* ---- the window: width, scrolling, pinned bars ---- */

	function viewHeight() {
		return svg.clientHeight || window.innerHeight || height;
	}

	function maxScroll() {
		return Math.max(0, height - viewHeight());
	}

	/* The title bar at the window's top, the details line at its bottom, over the frames. */
	function pin() {
		var sy = window.scrollY || 0;
		var dy = Math.min(0, sy + viewHeight() - (footTop + footH));
		head.setAttribute("transform", sy > 0 ? "translate(0," + sy + ")" : "");
		head.classList.toggle("pinned", sy > 0);
		foot.setAttribute("transform", dy < 0 ? "translate(0," + dy + ")" : "");
		foot.classList.toggle("pinned", dy < 0);
	}

	function scrollToY(y) {
		window.scrollTo(window.scrollX, Math.max(0, Math.min(maxScroll(), Math.round(y))));
		atRoots = icicle ? window.scrollY <= 1 : window.scrollY >= maxScroll() - 1;
		pin();
	}

	/* To the roots: the bottom of a flame graph, the top of an icicle. */
	function home() {
		scrollToY(icicle ? 0 : maxScroll());
	}

	/* The zoomed frame at the roots' end of the view, its parent row below (flame) or above. */
	function reveal(f) {
		if (icicle) scrollToY(f.y - frameh - headH - 4);
		else scrollToY(f.y + 2 * frameh + footH + 4 - viewHeight());
	}

	/* A heading cut to room px: its whole text is data-full when the writer cut it. */
	function setHeading(el, m, room) {
		var s = clip(m, el.getAttribute("data-full") || el.textContent, room);
		if (el.textContent !== s) el.textContent = s;
	}

	/* The title bar's texts: centred or right-aligned for the width, headings cut to fit. */
	function placeBars() {
		titleEl.setAttribute("x", (width / 2).toFixed(1));
		setHeading(titleEl, fonts.title, width - 190); /* centred, 10 px clear of the buttons */
		if (subtitleEl) {
			subtitleEl.setAttribute("x", (width / 2).toFixed(1));
			setHeading(subtitleEl, fonts.subtitle, width - 40);
		}
		searchBtn.setAttribute("x", (width - xpad - 30).toFixed(1));
		icBtn.setAttribute("x", (width - xpad).toFixed(1));
		matchedEl.setAttribute("x", (width - xpad).toFixed(1));
		var empty = doc.getElementById("empty");
		if (empty) empty.setAttribute("x", (width / 2).toFixed(1));
	}

	/* The legend's entries (a swatch, its text) in rows as wide as the graph, as the writer does. */
	function flowLegend() {
		var items = legend.children, m = fonts.legend, x = xpad, y;
		if (svg.classList.contains("diff") || items.length < 2) return;
		y = num(items[0], "y");
		for (var i = 0; i + 1 < items.length; i += 2) {
			var adv = 16 + m.width(items[i + 1].textContent) + 18;
			if (x + adv > width - xpad && x > xpad) {
				x = xpad;
				y += 18;
			}
			items[i].setAttribute("x", x.toFixed(1));
			items[i].setAttribute("y", y.toFixed(1));
			items[i + 1].setAttribute("x", (x + 16).toFixed(1));
			items[i + 1].setAttribute("y", (y + 10.5).toFixed(1));
			x += adv;
		}
		height = y + 18 + 8;
	}

	/*
	 * Sizes the picture to the window, 1 user unit a px so that text keeps its size. A new height
	 * (the legend's rows) can bring or take away the vertical scroll bar, which changes the width
	 * without a resize event: measured again, at most twice (narrower never means shorter).
	 */
	function fit() {
		for (var n = 0; n < 3; n++) {
			var w = svg.clientWidth || window.innerWidth || width;
			w = Math.max(MIN_WIDTH, Math.min(MAX_WIDTH, w));
			if (w === width && fitted) return;
			fitted = true;
			width = w;
			plotw = w - 2 * xpad;
			framesG.setAttribute("data-plotw", plotw.toFixed(2));
			placeBars();
			layout();
			flowLegend();
			svg.setAttribute("width", width);
			svg.setAttribute("height", height);
			svg.setAttribute("viewBox", "0 0 " + width + " " + height);
		}
	}

	function refit() {
		var keep = atRoots;
		fit();
		if (keep) home();
		else pin();
	}

	/* ---- zoom, details, search ---- */

	function frameOf(target) {
		while (target && target !== framesG) {
			if (target.prsIndex !== undefined) return frames[target.prsIndex];
			target = target.parentNode;
		}
		return null;
	}

	function zoom(f) {
		zoomed = f;
		layout();
		unzoomBtn.classList.remove("hide");
		if (searchTerm !== null) search(searchTerm);
		reveal(f);
	}

	function unzoom() {
		zoomed = null;
		layout();
		unzoomBtn.classList.add("hide");
		if (searchTerm !== null) search(searchTerm);
		home();
	}

	function pct(n, d) {
		return d > 0 ? (100 * n / d).toFixed(2) + "%" : "0%";
	}

	/* The bottom line: name, counts and shares (the title's counts line), location. */
	function showDetails(f) {
		var counts = "", where = "";
		for (var i = 1; i < f.lines.length; i++) {
			if (!counts && /^[0-9,]+ /.test(f.lines[i])) counts = f.lines[i];
			else if (i === 1 && !/^[0-9,]+ /.test(f.lines[i])) where = f.lines[i];
		}
		details.textContent = [f.name, counts, where].filter(function (x) { return x; }).join("  \u00b7  ");
	}

	/* The share of samples under matched frames, without counting nested matches twice. */
	function matchedShare(list) {
		list.sort(function (a, b) { return a.x - b.x || b.c - a.c; });
		var sum = 0, end = -1;
		for (var i = 0; i < list.length; i++) {
			var a = list[i];
			if (a.x >= end) {
				sum += a.c;
				end = a.x + a.c;
			} else if (a.x + a.c > end) { /* cannot happen in a tree, kept for safety */
				sum += a.x + a.c - end;
				end = a.x + a.c;
			}
		}
		return sum;
	}

	function resetSearch() {
		searchTerm = null;
		for (var i = 0; i < frames.length; i++) frames[i].rect.setAttribute("fill", frames[i].fill);
		matchedEl.textContent = " ";
		searchBtn.textContent = "Search";
		searchBtn.classList.remove("active");
	}

	function search(term) {
		var re;
		try {
			re = new RegExp(term, ignoreCase ? "i" : "");
		} catch (err) {
			resetSearch();
			matchedEl.textContent = "invalid regular expression";
			return null;
		}
		searchTerm = term;
		var hits = [];
		for (var i = 0; i < frames.length; i++) {
			var f = frames[i], hit = !f.merged && re.test(f.name);
			f.rect.setAttribute("fill", hit ? HIGHLIGHT : f.fill);
			if (hit) hits.push(f);
		}
		var base = zoomed ? zoomed : { x: 0, c: total };
		var inView = hits.filter(function (f) { return f.x >= base.x && f.x + f.c <= base.x + base.c; });
		var share = matchedShare(inView);
		matchedEl.textContent = "Matched: " + pct(share, base.c) + (zoomed ? " of the zoomed frame" : "");
		searchBtn.textContent = "Reset Search";
		searchBtn.classList.add("active");
		return share / (base.c || 1);
	}

	function searchPrompt() {
		var term = window.prompt("Search for (regular expression):", searchTerm || "");
		if (term !== null && term !== "") search(term);
	}

	framesG.addEventListener("click", function (ev) {
		var f = frameOf(ev.target);
		if (f && !f.merged) zoom(f);
	});
	framesG.addEventListener("mouseover", function (ev) {
		var f = frameOf(ev.target);
		if (f) showDetails(f);
	});
	framesG.addEventListener("mouseout", function () {
		details.textContent = " ";
	});
	unzoomBtn.addEventListener("click", unzoom);
	searchBtn.addEventListener("click", function () {
		if (searchTerm !== null) resetSearch();
		else searchPrompt();
	});
	icBtn.addEventListener("click", function () {
		ignoreCase = !ignoreCase;
		icBtn.classList.toggle("active", ignoreCase);
		if (searchTerm !== null) search(searchTerm);
	});
	window.addEventListener("keydown", function (ev) {
		if (ev.key === "F3" || (ev.ctrlKey && (ev.key === "f" || ev.key === "F"))) {
			ev.preventDefault();
			searchPrompt();
		} else if (ev.ctrlKey && (ev.key === "i" || ev.key === "I")) {
			ev.preventDefault();
			icBtn.dispatchEvent(new MouseEvent("click"));
		} else if (ev.key === "Escape") {
			resetSearch();
			if (zoomed) unzoom();
		}
	});
	/*
	 * A resize refits at the next frame, so a small graph follows the window as it is dragged.
	 * A big one (its last fit took more than 50 ms: about 30,000 frames on a slow machine) is
	 * refitted once the window has not changed for 150 ms, rather than at every step of a drag.
	 */
	var pending = 0, fitMs = 0;
	function refitTimed() {
		var t = window.performance.now();
		pending = 0;
		refit();
		fitMs = window.performance.now() - t;
	}
	window.addEventListener("resize", function () {
		if (fitMs > 50) {
			window.clearTimeout(pending);
			pending = window.setTimeout(refitTimed, 150);
		} else if (!pending) {
			pending = window.requestAnimationFrame(refitTimed);
		}
	});
	window.addEventListener("scroll", function () {
		atRoots = icicle ? window.scrollY <= 1 : window.scrollY >= maxScroll() - 1;
		pin();
	}, { passive: true });

	parseFrames();
	fonts = {
		title: measurer(titleEl), subtitle: subtitleEl && measurer(subtitleEl),
		legend: legend.children.length > 1 && measurer(legend.children[1]),
		frame: measurer(frames.length ? frames[0].text : titleEl)
	};
	try {
		window.history.scrollRestoration = "manual"; /* a reload opens at the roots too */
	} catch (err) { /* no history: nothing to restore */ }
	refitTimed(); /* at the roots: fit, then home() */
	/* ?s=REGEX searches on load (a link can share a search). */
	try {
		var params = new URLSearchParams(window.location.search);
		if (params.get("s")) search(params.get("s"));
	} catch (err) { /* no location (e.g. inlined): nothing to restore */ }

	/* For tests and for the console: prsFlameGraph.search("re"), .zoomTo(i), .unzoom(). */
	window.prsFlameGraph = {
		frames: frames, search: search, resetSearch: resetSearch, unzoom: unzoom,
		zoomTo: function (i) { zoom(frames[i]); }
	};
	svg.classList.add("ready");
})();
