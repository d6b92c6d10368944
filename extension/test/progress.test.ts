import assert from "node:assert/strict";
import { test } from "node:test";
import { WorkDoneTracker } from "../src/progress";

test("percentages become increments that add up to the latest percentage", () => {
  const tracker = new WorkDoneTracker();
  assert.deepEqual(tracker.step({ kind: "begin", title: "Optimizing", percentage: 0 }), { message: "Optimizing", increment: 0 });
  assert.deepEqual(tracker.step({ kind: "report", message: "doctor 1/3", percentage: 10 }), { message: "doctor 1/3", increment: 10 });
  assert.deepEqual(tracker.step({ kind: "report", percentage: 35 }), { increment: 25 });
});

test("progress never goes backwards and never passes 100", () => {
  const tracker = new WorkDoneTracker();
  tracker.step({ kind: "report", percentage: 60 });
  assert.deepEqual(tracker.step({ kind: "report", percentage: 40 }), { increment: 0 });
  assert.deepEqual(tracker.step({ kind: "report", percentage: 250 }), { increment: 40 });
});

test("without percentages only messages are shown", () => {
  const tracker = new WorkDoneTracker();
  assert.deepEqual(tracker.step({ kind: "begin", title: "Optimizing", message: "init" }), { message: "init" });
  assert.equal(tracker.step({ kind: "report" }), undefined);
  assert.deepEqual(tracker.step({ kind: "end", message: "promoted 2" }), { message: "promoted 2" });
  assert.equal(tracker.step({ kind: "end" }), undefined);
});
