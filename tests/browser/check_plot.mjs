// SPDX-License-Identifier: MIT
// Loads a static SVG plot (e.g. pyrsprof sweep's sweep.svg) in headless Chromium (Debian's
// /usr/bin/chromium through playwright-core), takes a screenshot, and prints what a reader would
// see as JSON on stdout, for tests/e2e/test_sweep.py to assert on:
//   { console_errors, page_errors, requests, injected, width, height, screenshot,
//     texts: [{ text, x, y, w, h }], overlaps: [[i, j]], outside: [i],
//     groups: { CLASS: { best, median, lines } } }   (elements of class best / median in each <g class>)
// Usage: node check_plot.mjs SVG SCREENSHOT.png
import { openPage } from "./chromium.mjs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const [svgPath, shotPath] = process.argv.slice(2);
if (!svgPath || !shotPath) {
	console.error("usage: node check_plot.mjs SVG SCREENSHOT.png");
	process.exit(2);
}
const profileDir = mkdtempSync(join(tmpdir(), "pyrsprof-chromium-"));
const result = { console_errors: [], page_errors: [], requests: [] };
let browser;
try {
	let page;
	({ browser, page } = await openPage(profileDir, { width: 1000, height: 800 }, result));
	page.on("dialog", async (d) => { result.injected = true; await d.dismiss(); });
	await page.goto("file://" + resolve(svgPath));
	Object.assign(result, await page.evaluate(() => {
		const svg = document.documentElement;
		const box = svg.getBoundingClientRect();
		const texts = [...svg.querySelectorAll("text")].map((t) => {
			const r = t.getBoundingClientRect();
			return { text: t.textContent, x: r.x - box.x, y: r.y - box.y, w: r.width, h: r.height };
		});
		const overlaps = [];
		for (let i = 0; i < texts.length; i++)
			for (let j = i + 1; j < texts.length; j++) {
				const a = texts[i], b = texts[j];
				// 1 px of slack: glyph boxes of neighbouring lines may touch
				if (a.x + a.w > b.x + 1 && b.x + b.w > a.x + 1 && a.y + a.h > b.y + 1 && b.y + b.h > a.y + 1)
					overlaps.push([i, j]);
			}
		const outside = texts.map((t, i) => (t.x < 0 || t.y < 0 || t.x + t.w > box.width ||
			t.y + t.h > box.height ? i : -1)).filter((i) => i >= 0);
		const groups = {};
		for (const g of svg.querySelectorAll("g[class]"))
			groups[g.getAttribute("class")] = { best: g.querySelectorAll(".best").length,
				median: g.querySelectorAll(".median").length,
				lines: g.querySelectorAll(":scope > line").length };
		return { width: box.width, height: box.height, texts, overlaps, outside, groups,
			injected: window.__pyrsprof_pwned === true };
	}));
	await page.screenshot({ path: shotPath, fullPage: false, timeout: 30000 });
	result.screenshot = shotPath;
} catch (e) {
	result.error = String(e);
} finally {
	if (browser) await browser.close();
	rmSync(profileDir, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
process.exit(result.error ? 1 : 0);
