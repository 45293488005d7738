// SPDX-License-Identifier: MIT
// One headless Chromium (Debian's /usr/bin/chromium driven by playwright-core) for a whole pytest
// module: tests/e2e/chromium.py starts this, writes one JSON command per line on stdin and reads
// one JSON answer per line on stdout, {"ok": VALUE} or {"error": TEXT}. Commands ("op"):
//   open   {path, width, height, ready}  closes the page, opens file PATH in a new one with that
//                                       viewport; with ready, waits for the graph's "ready" class
//   eval   {js, arg}        calls the function whose source is js with arg in the page: its result
//   resize {width, height}  sets the viewport, waits for a flame graph to take the new width,
//                           then two animation frames
//   shot   {path}           screenshot of the viewport into PATH (PNG)
//   mouse  {action, x, y}   "move" or "click" at viewport coordinates
//   key    {key}            a key press, in playwright's names ("Escape", "Control+f")
//   answer {text}           the answer to the page's next prompt() (else dialogs are dismissed)
//   log    {}               since open: console errors, page errors, requests that are not
//                           file: or data: URLs, and dialog messages
// Scroll bars are shown (playwright hides them by default): the window is the one a user sees.
import { collect, launch } from "./chromium.mjs";
import { mkdtempSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const profileDir = mkdtempSync(join(tmpdir(), "pyrsprof-chromium-"));
const context = await launch(profileDir, { width: 1366, height: 768 }, { scrollbars: true });
let page = null, log = null, answer = null;

async function open(cmd) {
	if (page) await page.close();
	page = await context.newPage();
	log = { console_errors: [], page_errors: [], requests: [], dialogs: [] };
	const mine = log;
	collect(page, mine);
	page.on("dialog", async (d) => {
		mine.dialogs.push(d.message());
		if (answer !== null) await d.accept(answer);
		else await d.dismiss();
		answer = null;
	});
	await page.setViewportSize({ width: cmd.width, height: cmd.height });
	await page.goto("file://" + resolve(cmd.path));
	if (cmd.ready)
		await page.waitForFunction(() => document.documentElement.classList.contains("ready"), null,
			{ timeout: 20000 });
	return null;
}

const frames = () => page.evaluate(() =>
	new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(null)))));

const ops = {
	open,
	eval: (c) => page.evaluate(`(${c.js})(${JSON.stringify(c.arg ?? null)})`),
	resize: async (c) => {
		await page.setViewportSize({ width: c.width, height: c.height });
		// a flame graph refits at the next frame, or 150 ms after the last resize when big
		await page.waitForFunction(() => !window.prsFlameGraph || Number(document.documentElement
			.getAttribute("width")) === Math.max(200, document.documentElement.clientWidth), null,
			{ timeout: 20000 });
		return frames();
	},
	shot: async (c) => {
		await page.screenshot({ path: c.path, fullPage: false, timeout: 15000 });
		return c.path;
	},
	mouse: async (c) => {
		if (c.action === "click") await page.mouse.click(c.x, c.y);
		else await page.mouse.move(c.x, c.y);
		return frames();
	},
	key: async (c) => {
		await page.keyboard.press(c.key);
		return frames();
	},
	answer: async (c) => {
		answer = c.text;
		return null;
	},
	log: async () => log,
};

const lines = createInterface({ input: process.stdin });
try {
	for await (const line of lines) {
		let reply;
		try {
			const cmd = JSON.parse(line);
			if (!ops[cmd.op]) throw new Error(`unknown op ${cmd.op}`);
			reply = { ok: (await ops[cmd.op](cmd)) ?? null };
		} catch (e) {
			reply = { error: String(e && e.stack || e) };
		}
		process.stdout.write(JSON.stringify(reply) + "\n");
	}
} finally {
	await context.close();
	rmSync(profileDir, { recursive: true, force: true });
}
