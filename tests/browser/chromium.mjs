// SPDX-License-Identifier: MIT
// Debian's /usr/bin/chromium headless through playwright-core, in a fresh profile folder
// (--user-data-dir, which playwright passes for a persistent context). Shared by check_plot.mjs
// and session.mjs.
//   launch(profileDir, viewport, {scrollbars}): the browser context; with scrollbars, the scroll
//     bars a user sees (playwright hides them by default)
//   collect(page, result): console errors, page errors and requests that are not file: or data:
//     URLs into result.console_errors, result.page_errors and result.requests
//   openPage(profileDir, viewport, result): launch() and one page collected into result
import { chromium } from "playwright-core";

export function launch(profileDir, viewport, { scrollbars = false } = {}) {
	return chromium.launchPersistentContext(profileDir, {
		executablePath: "/usr/bin/chromium",
		headless: true,
		ignoreDefaultArgs: scrollbars ? ["--hide-scrollbars"] : [],
		args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync"],
		viewport,
	});
}

export function collect(page, result) {
	page.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
	page.on("pageerror", (e) => result.page_errors.push(String(e)));
	page.on("request", (r) => { if (!/^(file|data):/.test(r.url())) result.requests.push(r.url()); });
}

export async function openPage(profileDir, viewport, result) {
	const browser = await launch(profileDir, viewport);
	const page = browser.pages()[0] ?? await browser.newPage();
	collect(page, result);
	return { browser, page };
}
