/* SPDX-License-Identifier: MIT */
/*
 * pyrsprof flame graph interaction, embedded in every SVG by flamegraph/svg.c.
 * Each frame is <g class="f" data-x data-c data-d> with a <title> (first line: the name), a <rect>
 * and a <text>; offsets and counts are in samples. Conventions follow flamegraph.pl: click a frame
 * to zoom (its ancestors stay, faded, as context), click "Reset Zoom" or press Esc to reset,
 * Ctrl-F (or F3) to search by regular expression, Ctrl-I to toggle case, Esc to clear.
 * Text from the profile is only ever assigned with textContent: nothing is parsed as markup.
 */
(function () {
	"use strict";
	var doc = document, svg = doc.documentElement;
	var framesG = doc.getElementById("frames");
	var details = doc.getElementById("details"), matchedEl = doc.getElementById("matched");
	var unzoomBtn = doc.getElementById("unzoom"), searchBtn = doc.getElementById("search");
	var icBtn = doc.getElementById("ignorecase");
	var HIGHLIGHT = "rgb(230,0,230)", CHAR_W = 12 * 0.59;
	var total = Number(framesG.getAttribute("data-total")) || 0;
	var plotw = Number(framesG.getAttribute("data-plotw"));
	var xpad = Number(framesG.getAttribute("data-xpad"));
	var unit = framesG.getAttribute("data-unit") || "samples";
	var frames = [], zoomed = null, searchTerm = null, ignoreCase = false;

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
				d: Number(g.getAttribute("data-d")), fill: rect.getAttribute("fill")
			});
			g.prsIndex = frames.length - 1;
		}
	}

	function label(name, width) {
		var fit = Math.floor((width - 6) / CHAR_W);
		var chars = Array.from(name);
		if (fit < 3) return "";
		if (chars.length <= fit) return name;
		return chars.slice(0, fit - 2).join("") + "..";
	}

	function place(f, x, w) {
		f.rect.setAttribute("x", x.toFixed(2));
		f.rect.setAttribute("width", w.toFixed(2));
		f.text.setAttribute("x", (x + 3).toFixed(2));
		f.text.textContent = label(f.name, w);
	}

	function frameOf(target) {
		while (target && target !== framesG) {
			if (target.prsIndex !== undefined) return frames[target.prsIndex];
			target = target.parentNode;
		}
		return null;
	}

	function zoom(f) {
		var x0 = f.x, c = f.c;
		zoomed = f;
		for (var i = 0; i < frames.length; i++) {
			var e = frames[i];
			var inside = e.d >= f.d && e.x >= x0 && e.x + e.c <= x0 + c;
			var ancestor = e.d < f.d && e.x <= x0 && e.x + e.c >= x0 + c;
			if (inside) {
				e.g.classList.remove("hide", "parent");
				place(e, xpad + (e.x - x0) / c * plotw, e.c / c * plotw);
			} else if (ancestor) {
				e.g.classList.remove("hide");
				e.g.classList.add("parent");
				place(e, xpad, plotw);
			} else {
				e.g.classList.add("hide");
			}
		}
		unzoomBtn.classList.remove("hide");
		if (searchTerm !== null) search(searchTerm);
	}

	function unzoom() {
		zoomed = null;
		for (var i = 0; i < frames.length; i++) {
			var e = frames[i];
			e.g.classList.remove("hide", "parent");
			place(e, xpad + e.x / total * plotw, e.c / total * plotw);
		}
		unzoomBtn.classList.add("hide");
		if (searchTerm !== null) search(searchTerm);
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

	parseFrames();
	/* ?s=REGEX searches on load (a link can share a search). */
	try {
		var params = new URLSearchParams(window.location.search);
		if (params.get("s")) search(params.get("s"));
	} catch (err) { /* no location (e.g. inlined): nothing to restore */ }

	/* For tests and for the console: prsFlameGraph.search("re"), .zoomTo(i), .reset(). */
	window.prsFlameGraph = {
		frames: frames, search: search, resetSearch: resetSearch, unzoom: unzoom,
		zoomTo: function (i) { zoom(frames[i]); }
	};
	svg.classList.add("ready");
})();
