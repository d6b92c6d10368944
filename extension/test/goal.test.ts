import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_GOAL, goalInputError, MAX_GOAL_LENGTH, normalizeGoal } from "../src/goal";

test("keeps an ordinary goal", () => {
  assert.deepEqual(normalizeGoal("faster"), { ok: true, goal: "faster" });
});

test("trims and folds whitespace, newlines included", () => {
  assert.deepEqual(normalizeGoal("  faster \n\t within  40 GiB "), { ok: true, goal: "faster within 40 GiB" });
});

test("an empty goal means the default", () => {
  assert.deepEqual(normalizeGoal("   "), { ok: true, goal: DEFAULT_GOAL });
  assert.equal(goalInputError(""), undefined);
});

test("refuses control characters", () => {
  const check = normalizeGoal("fast\u0000er");
  assert.equal(check.ok, false);
  assert.match(goalInputError("a\u001bb") ?? "", /control characters/);
});

test("refuses a goal past the length limit, counted after folding", () => {
  assert.equal(normalizeGoal("x".repeat(MAX_GOAL_LENGTH)).ok, true);
  assert.match(goalInputError("x".repeat(MAX_GOAL_LENGTH + 1)) ?? "", /201 characters/);
  assert.equal(normalizeGoal(`${"x".repeat(MAX_GOAL_LENGTH)}     `).ok, true);
});
