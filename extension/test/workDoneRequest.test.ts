// executeCommandWithWorkDone against a real pygls server over stdio (test/fixtures/progress_server.py).
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as path from "node:path";
import { after, before, test } from "node:test";
import {
  CancellationTokenSource,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  type ProtocolConnection,
  ShutdownRequest,
} from "vscode-languageserver-protocol";
import { createProtocolConnection } from "vscode-languageserver-protocol/node";
import type { ProgressStep } from "../src/progress";
import { executeCommandWithWorkDone } from "../src/workDoneRequest";

const EXTENSION = path.join(__dirname, "..", "..");
const FIXTURE = path.join(EXTENSION, "test", "fixtures", "progress_server.py");

/** A Python with pygls: $INFRARSI_TEST_PYTHON, else the project's .venv, else python3. */
function findPython(): string | undefined {
  const candidates = [process.env.INFRARSI_TEST_PYTHON, path.join(EXTENSION, "..", ".venv", "bin", "python"), "python3"];
  return candidates.find((python) => python !== undefined && spawnSync(python, ["-c", "import pygls.lsp.server"]).status === 0);
}

const python = findPython();
const skip = python === undefined ? "no Python with pygls (set INFRARSI_TEST_PYTHON)" : false;
let server: ChildProcess | undefined;
let connection: ProtocolConnection | undefined;

before(async () => {
  if (python === undefined) {
    return;
  }
  const child = spawn(python, [FIXTURE], { stdio: ["pipe", "pipe", "ignore"] });
  server = child;
  if (child.stdout === null || child.stdin === null) {
    throw new Error("the fixture server has no stdio pipes");
  }
  connection = createProtocolConnection(child.stdout, child.stdin);
  connection.listen();
  await connection.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: null,
    capabilities: { window: { workDoneProgress: true } },
  });
  await connection.sendNotification(InitializedNotification.type, {});
});

after(async () => {
  if (connection !== undefined) {
    await connection.sendRequest(ShutdownRequest.type);
    await connection.sendNotification(ExitNotification.type);
    connection.dispose();
  }
  server?.kill();
});

test("progress on the request's token reaches the caller, then the reply", { skip, timeout: 20_000 }, async () => {
  assert.ok(connection !== undefined);
  const steps: ProgressStep[] = [];
  const reply = await executeCommandWithWorkDone(
    connection,
    "infrarsi.server.optimize",
    { workspace: "/repo", goal: "faster" },
    "token-1",
    (step) => steps.push(step),
  );
  assert.deepEqual(reply, { summary: "faster in /repo" });
  assert.deepEqual(steps, [
    { message: "Optimizing", increment: 0 },
    { message: "doctor", increment: 40 },
    { message: "run", increment: 50 },
    { message: "promoted 1" },
  ]);
});

test("cancelling stops the server's work instead of waiting for it", { skip, timeout: 20_000 }, async () => {
  assert.ok(connection !== undefined);
  const source = new CancellationTokenSource();
  const outcome = executeCommandWithWorkDone(
    connection,
    "infrarsi.server.wait",
    { workspace: "/repo" },
    "token-2",
    (step) => {
      if (step.message === "Waiting") {
        source.cancel();
      }
    },
    source.token,
  ).then(
    (reply) => ({ reply }),
    (error: unknown) => ({ error }),
  );
  // Either the work-done cancel reached the command, or pygls cancelled the request outright
  // (RequestCancelled, -32800); both end it long before the server's 10 s loop would.
  const result = await outcome;
  if ("reply" in result) {
    assert.deepEqual(result.reply, { cancelled: true });
  } else {
    assert.equal((result.error as { code?: number }).code, -32800);
  }
});
