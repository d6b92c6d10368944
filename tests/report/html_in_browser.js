// Opens a report.html in headless Chromium and prints what a reader's browser drew, as JSON: each
// image's alt text and natural width (0: not drawn), the headings, and whether the page is wider
// than an 80-column-ish window.
//
//   node html_in_browser.js CHROMIUM REPORT_HTML

"use strict";
const puppeteer = require("puppeteer-core");

const [chromium, file] = process.argv.slice(2);

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1000, height: 800 });
    await page.goto(`file://${file}`, { waitUntil: "load" });
    const drawn = await page.evaluate(async () => {
      await Promise.all(Array.from(document.images).map((img) => img.decode().catch(() => null)));
      return {
        images: Array.from(document.images).map((img) => ({ alt: img.alt, width: img.naturalWidth })),
        headings: Array.from(document.querySelectorAll("h1, h2, h3")).map((h) => h.textContent.trim()),
      };
    });
    console.log(JSON.stringify(drawn));
  } finally {
    await browser.close();
  }
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
