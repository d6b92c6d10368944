import assert from "node:assert/strict";
import { test } from "node:test";
import { chooseReport, describeReply } from "../src/report";

test("a markdown report opens as markdown, with its summary", () => {
  const choice = chooseReport({ path: "/repo/.infrarsi/report.md", summary: "1.42× faster" }, "/repo");
  assert.deepEqual(choice, { ok: true, view: { kind: "markdown", path: "/repo/.infrarsi/report.md", summary: "1.42× faster" } });
});

test("an html report opens as html; case of the extension does not matter", () => {
  const choice = chooseReport({ path: "/repo/.infrarsi/report.HTML", summary: "" }, "/repo");
  assert.ok(choice.ok);
  assert.equal(choice.view.kind, "html");
});

test("a relative path resolves against the workspace folder", () => {
  const choice = chooseReport({ path: ".infrarsi/report.md" }, "/repo");
  assert.ok(choice.ok);
  assert.equal(choice.view.path, "/repo/.infrarsi/report.md");
  assert.equal(choice.view.summary, "");
});

test("no report yet is explained", () => {
  const choice = chooseReport(null, "/repo");
  assert.equal(choice.ok, false);
  assert.match(choice.ok ? "" : choice.message, /Optimize/);
});

test("malformed replies are refused with a reason", () => {
  const reasons = [42, ["report.md"], {}, { path: "" }, { path: "/repo/.infrarsi/report.json" }].map((reply) => {
    const choice = chooseReport(reply, "/repo");
    assert.equal(choice.ok, false, JSON.stringify(reply));
    return choice.ok ? "" : choice.message;
  });
  assert.match(reasons[0] ?? "", /not an object/);
  assert.match(reasons[2] ?? "", /no path/);
  assert.match(reasons[4] ?? "", /expected a \.md or \.html/);
});

test("describeReply uses the server's summary when there is one", () => {
  assert.equal(describeReply("InfraRSI: Optimize", { summary: " 1.3× faster, 2 patches " }), "InfraRSI: Optimize: 1.3× faster, 2 patches");
  assert.equal(describeReply("InfraRSI: Apply", null), "InfraRSI: Apply: done.");
  assert.equal(describeReply("InfraRSI: Apply", { summary: 3 }), "InfraRSI: Apply: done.");
});
