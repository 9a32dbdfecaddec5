/** Steps of the renter console (node/api/console) that its Chromium tests share. */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";

/** Submits the console's task form; fails with the page's own error message when it shows one. */
export async function submitAndWait(page: Page): Promise<void> {
  const before = await page.$$eval("#tasks-table tbody tr", (rows) => rows.length);
  await page.click("#submit-button");
  await page.waitForFunction(
    (count) => document.querySelectorAll("#tasks-table tbody tr").length > count || !document.querySelector<HTMLElement>("#submit-error")!.hidden,
    before,
    { timeout: 90_000 },
  );
  assert.equal(await page.isHidden("#submit-error"), true, (await page.textContent("#submit-error")) ?? "");
}
