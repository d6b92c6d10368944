import assert from "node:assert/strict";
import { test } from "node:test";
import { assertDistinct, CLIENT_COMMANDS, SERVER_COMMAND_FOR, SERVER_COMMANDS } from "../src/ids";

test("client and server ids never coincide", () => {
  const client: string[] = Object.values(CLIENT_COMMANDS);
  for (const id of Object.values(SERVER_COMMANDS)) {
    assert.ok(!client.includes(id), id);
  }
});

test("server ids live under infrarsi.server", () => {
  for (const id of Object.values(SERVER_COMMANDS)) {
    assert.match(id, /^infrarsi\.server\.[a-z]+$/);
  }
});

test("each server-backed palette command maps to its server command", () => {
  assert.deepEqual(SERVER_COMMAND_FOR, {
    "infrarsi.optimize": "infrarsi.server.optimize",
    "infrarsi.apply": "infrarsi.server.apply",
    "infrarsi.showReport": "infrarsi.server.report",
  });
  assert.equal(SERVER_COMMAND_FOR[CLIENT_COMMANDS.restartServer], undefined);
});

test("assertDistinct names every clashing id", () => {
  assert.throws(() => assertDistinct(["a", "b", "c"], ["c", "b"]), /b, c/);
  assert.doesNotThrow(() => assertDistinct(["a"], ["b"]));
});
