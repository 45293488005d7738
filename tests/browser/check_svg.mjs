// SPDX-License-Identifier: MIT
// Drives one flame graph SVG in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core) and prints what it saw as JSON on stdout, for tests/e2e/test_flamegraph_browser.py
// to assert on. Usage:
//   node check_svg.mjs SVG ARTIFACT_PREFIX [--click NAME] [--search REGEX]
// Steps: load (collecting console errors, page errors and failed requests), screenshot; hover the
// --click frame and read the details line; click it (mouse, at the frame's centre) and measure its
// width against the plot width, screenshot; Esc; search REGEX through Ctrl-F and the prompt dialog,
// read the "Matched" text and the highlighted frames, screenshot; Esc and check the reset.
import { openPage } from "./chromium.mjs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const args = process.argv.slice(2);
if (args.length < 2) {
	console.error("usage: node check_svg.mjs SVG ARTIFACT_PREFIX [--click NAME] [--search REGEX]");
	process.exit(2);
}
const [svgPath, prefix] = args;
const opt = (name) => {
	const i = args.indexOf(name);
	return i >= 0 ? args[i + 1] : null;
};
const clickName = opt("--click");
const searchRe = opt("--search");

const profileDir = mkdtempSync(join(tmpdir(), "pyrsprof-chromium-"));
const result = { console_errors: [], page_errors: [], requests: [], screenshots: [] };
let browser;
try {
	let page;
	({ browser, page } = await openPage(profileDir, { width: 1300, height: 900 }, result));
	page.on("dialog", async (d) => {
		result.dialog = d.message();
		await d.accept(searchRe ?? "");
	});
	await page.goto("file://" + resolve(svgPath));
	await page.waitForFunction(() => document.documentElement.classList.contains("ready"), null,
		{ timeout: 10000 });
	// Did a hostile name run as script? Names in the fixture call alert()/set this global.
	result.injected = await page.evaluate(() => window.__pyrsprof_pwned === true);
	result.frames = await page.evaluate(() => window.prsFlameGraph.frames.length);
	const shot = async (name) => {
		const p = `${prefix}-${name}.png`;
		await page.screenshot({ path: p, fullPage: false, timeout: 15000 });
		result.screenshots.push(p);
	};
	await shot("loaded");

	const plotw = await page.evaluate(() => Number(document.getElementById("frames").getAttribute("data-plotw")));
	result.plotw = plotw;
	if (clickName) {
		const idx = await page.evaluate((n) => window.prsFlameGraph.frames.findIndex((f) => f.name === n), clickName);
		result.click_index = idx;
		if (idx >= 0) {
			const box = await page.evaluate((i) => {
				const r = window.prsFlameGraph.frames[i].rect.getBoundingClientRect();
				return { x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width };
			}, idx);
			result.width_before = box.w;
			await page.mouse.move(box.x, box.y);
			result.details = await page.evaluate(() => document.getElementById("details").textContent);
			await page.mouse.click(box.x, box.y);
			result.width_after = await page.evaluate((i) =>
				Number(window.prsFlameGraph.frames[i].rect.getAttribute("width")), idx);
			result.unzoom_visible = await page.evaluate(() =>
				!document.getElementById("unzoom").classList.contains("hide"));
			result.hidden_after_zoom = await page.evaluate(() =>
				window.prsFlameGraph.frames.filter((f) => f.g.classList.contains("hide")).length);
			await shot("zoomed");
			await page.keyboard.press("Escape");
			result.width_reset = await page.evaluate((i) =>
				Number(window.prsFlameGraph.frames[i].rect.getAttribute("width")), idx);
			// the same with the "Reset Zoom" button
			await page.mouse.click(box.x, box.y);
			await page.click("#unzoom");
			result.width_reset_button = await page.evaluate((i) =>
				Number(window.prsFlameGraph.frames[i].rect.getAttribute("width")), idx);
			result.unzoom_hidden_after_reset = await page.evaluate(() =>
				document.getElementById("unzoom").classList.contains("hide"));
		}
	}
	if (searchRe !== null) {
		await page.mouse.move(5, 5);
		await page.keyboard.press("Control+f");
		await page.waitForFunction(() => document.getElementById("matched").textContent.trim() !== "",
			null, { timeout: 5000 });
		result.matched = await page.evaluate(() => document.getElementById("matched").textContent);
		result.highlighted = await page.evaluate(() => window.prsFlameGraph.frames
			.filter((f) => f.rect.getAttribute("fill") === "rgb(230,0,230)").map((f) => f.name));
		await shot("search");
		await page.keyboard.press("Escape");
		result.matched_after_reset = await page.evaluate(() => document.getElementById("matched").textContent);
	}
} catch (e) {
	result.error = String(e && e.stack || e);
} finally {
	if (browser) await browser.close();
	rmSync(profileDir, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
process.exit(result.error ? 1 : 0);
