// SPDX-License-Identifier: MIT
// Opens Debian's /usr/bin/chromium headless through playwright-core, in a fresh profile folder
// (--user-data-dir, which playwright passes for a persistent context), with one page whose
// console errors, page errors and non-file requests are collected into result.console_errors,
// result.page_errors and result.requests. Shared by check_svg.mjs and check_plot.mjs.
import { chromium } from "playwright-core";

export async function openPage(profileDir, viewport, result) {
	const browser = await chromium.launchPersistentContext(profileDir, {
		executablePath: "/usr/bin/chromium",
		headless: true,
		args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync"],
		viewport,
	});
	const page = browser.pages()[0] ?? await browser.newPage();
	page.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
	page.on("pageerror", (e) => result.page_errors.push(String(e)));
	page.on("request", (r) => { if (!r.url().startsWith("file:")) result.requests.push(r.url()); });
	return { browser, page };
}
