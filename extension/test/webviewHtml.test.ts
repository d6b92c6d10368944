import assert from "node:assert/strict";
import { test } from "node:test";
import { reportHtmlForWebview } from "../src/webviewHtml";

const BASE = "https://file+.vscode-resource.vscode-cdn.net/repo/.infrarsi";
const CSP_SOURCE = "https://*.vscode-cdn.net";

test("puts the base and CSP right after <head>, before the report's own tags", () => {
  const html = reportHtmlForWebview('<html><head lang="en"><title>r</title></head><body><img src="plots/mfu.png"></body></html>', BASE, CSP_SOURCE);
  const head = html.indexOf('<head lang="en">') + '<head lang="en">'.length;
  assert.equal(html.indexOf("<meta http-equiv=\"Content-Security-Policy\""), head);
  assert.ok(html.indexOf(`<base href="${BASE}/">`) < html.indexOf("<title>"));
  assert.match(html, /img-src https:\/\/\*\.vscode-cdn\.net data:/);
  assert.doesNotMatch(html, /script-src/);
});

test("wraps a fragment without <head> into a document", () => {
  const html = reportHtmlForWebview("<h1>Report</h1>", `${BASE}/`, CSP_SOURCE);
  assert.match(html, /^<!DOCTYPE html><html><head><meta [^>]+><base href="[^"]+\/\.infrarsi\/"><\/head><body><h1>Report<\/h1><\/body><\/html>$/);
});

test("does not mistake <header> for <head>", () => {
  const html = reportHtmlForWebview("<header>x</header>", BASE, CSP_SOURCE);
  assert.ok(html.startsWith("<!DOCTYPE html>"));
});

test("escapes quotes in the base URI", () => {
  assert.match(reportHtmlForWebview("<head></head>", 'https://x/a"b', CSP_SOURCE), /href="https:\/\/x\/a&quot;b\/"/);
});
