// Drives the workbench as a user would; every step checks what it must see, saves a screenshot and
// fails the run (exit 1) when it does not see it in time.
//
//   node drive.js WORKBENCH_URL DEVTOOLS_URL WORKSPACE SHOTS

"use strict";
const fs = require("node:fs");
const path = require("node:path");
const puppeteer = require("puppeteer-core");

const [url, devtools, workspace, shots] = process.argv.slice(2);
const started = Date.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (message) => console.log(`[${((Date.now() - started) / 1000).toFixed(0)} s] ${message}`);

async function until(what, seconds, probe) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await probe();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${seconds} s waiting for ${what}`);
    }
    await sleep(500);
  }
}

async function shot(page, name) {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file });
  log(`screenshot ${file}`);
}

async function keys(page, ...combo) {
  for (const key of combo) await page.keyboard.down(key);
  for (const key of combo.slice().reverse()) await page.keyboard.up(key);
}

async function quickInput(page, opener, text) {
  await keys(page, ...opener);
  await page.waitForSelector(".quick-input-widget input", { visible: true });
  await sleep(300);
  await page.keyboard.type(text, { delay: 10 });
  await sleep(800);
  await page.keyboard.press("Enter");
}

async function visibleText(page, selector) {
  // the editor renders spaces as non-breaking ones
  const texts = await page.$$eval(selector, (els) => els.filter((e) => e.offsetParent !== null).map((e) => e.innerText));
  return texts.map((t) => t.replace(/\u00a0/g, " "));
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const browser = await puppeteer.connect({ browserURL: devtools, defaultViewport: { width: 1600, height: 1000 } });
  const page = (await browser.pages())[0] ?? (await browser.newPage());
  page.setDefaultTimeout(60_000);
  try {
    await page.goto(url, { waitUntil: "domcontentloaded" });
    await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    log("workbench loaded");

    // 1. the attention code gets its diagnostic
    const model = fs.readFileSync(path.join(workspace, "model.py"), "utf8").split("\n");
    const attention = model.findIndex((line) => line.includes("att = (q @ k.transpose(-2, -1))")) + 1;
    const entry = await until("model.py in the Explorer", 60, async () => {
      for (const candidate of await page.$$(".explorer-folders-view .monaco-list-row")) {
        if ((await candidate.evaluate((e) => e.innerText.trim())) === "model.py") return candidate;
      }
      return undefined;
    });
    await entry.click();
    await until("model.py open in the editor", 60, async () =>
      (await visibleText(page, ".monaco-editor .view-lines")).join("\n").includes("class LayerNorm"));
    await sleep(1000);
    await quickInput(page, ["Control", "KeyG"], String(attention));
    await until("the sdpa_attention diagnostic on the attention code", 180, async () => {
      const squiggles = await page.$$(".monaco-editor .squiggly-info");
      return squiggles.length > 0;
    });
    await sleep(500);
    await shot(page, "01-attention-diagnostic");
    log(`diagnostic on model.py:${attention}`);

    // 2. its quick fix rewrites the attention into one scaled_dot_product_attention call
    await quickInput(page, ["Control", "KeyG"], String(attention));
    await keys(page, "Control", "Period");
    const row = await until("the quick-fix menu with the sdpa_attention fix", 60, async () => {
      const rows = await page.$$(".action-widget .monaco-list-row");
      for (const candidate of rows) {
        if ((await candidate.evaluate((e) => e.innerText)).includes("sdpa_attention")) return candidate;
      }
      return undefined;
    });
    await shot(page, "02-quick-fix-menu");
    await row.click();
    await until("the rewritten attention in the editor", 60, async () =>
      (await visibleText(page, ".monaco-editor .view-lines")).join("\n").includes("scaled_dot_product_attention"));
    await sleep(500);
    await shot(page, "03-quick-fix-applied");
    log("quick fix applied");
    await keys(page, "Control", "KeyZ"); // back to the committed code the optimize run measures
    await sleep(500);

    // 3. Optimize with a two-trial budget, to its notification
    await quickInput(page, ["Control", "Shift", "KeyP"], "InfraRSI: Optimize");
    await page.waitForSelector(".quick-input-widget input", { visible: true });
    await sleep(800);
    await keys(page, "Control", "KeyA");
    await page.keyboard.type("faster, at most 2 trials", { delay: 10 });
    await page.keyboard.press("Enter");
    log("optimize started");
    let progressShot = false;
    const finished = await until("the Optimize notification", 420, async () => {
      const toasts = await visibleText(page, ".notifications-toasts .notification-toast");
      if (!progressShot && toasts.some((t) => t.includes("Optimize “"))) {
        progressShot = true;
        await shot(page, "04-optimize-progress");
      }
      return toasts.find((t) => t.includes("InfraRSI: Optimize") && !t.includes("Optimize “") && t.includes("Show Report"));
    });
    await shot(page, "05-optimize-finished");
    log(`optimize finished: ${finished.replace(/\n/g, " / ")}`);
    if (/failed|cancelled/i.test(finished)) {
      throw new Error(`the Optimize run did not succeed: ${finished}`);
    }
    log(`all steps passed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } catch (error) {
    await shot(page, "99-failure").catch(() => undefined);
    throw error;
  } finally {
    browser.disconnect();
  }
}

main().catch((error) => {
  console.error(`e2e failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
