import assert from "node:assert/strict";
import { test } from "node:test";
import { type LaunchSettings, resolveLaunch, sameLaunch } from "../src/config";

const base: LaunchSettings = {
  interpreter: "",
  args: [],
  pythonExtensionInterpreter: undefined,
  workspaceFolder: "/repo",
  home: "/home/me",
};

test("falls back to python3 when nothing is set", () => {
  const launch = resolveLaunch(base);
  assert.deepEqual(launch, { command: "python3", args: ["-m", "infrarsi_server"], source: "default", warnings: [] });
});

test("prefers the Python extension's interpreter over the default", () => {
  const launch = resolveLaunch({ ...base, pythonExtensionInterpreter: "/envs/a/bin/python" });
  assert.equal(launch.command, "/envs/a/bin/python");
  assert.equal(launch.source, "python-extension");
});

test("the setting wins over the Python extension", () => {
  const launch = resolveLaunch({ ...base, interpreter: "/venv/bin/python", pythonExtensionInterpreter: "/envs/a/bin/python" });
  assert.equal(launch.command, "/venv/bin/python");
  assert.equal(launch.source, "setting");
});

test("blank setting counts as unset", () => {
  assert.equal(resolveLaunch({ ...base, interpreter: "   " }).source, "default");
});

test("expands ${workspaceFolder}, ~ and workspace-relative paths", () => {
  assert.equal(resolveLaunch({ ...base, interpreter: "${workspaceFolder}/.venv/bin/python" }).command, "/repo/.venv/bin/python");
  assert.equal(resolveLaunch({ ...base, interpreter: "~/venvs/x/bin/python" }).command, "/home/me/venvs/x/bin/python");
  assert.equal(resolveLaunch({ ...base, interpreter: ".venv/bin/python" }).command, "/repo/.venv/bin/python");
});

test("a bare command name is left for PATH lookup", () => {
  assert.equal(resolveLaunch({ ...base, interpreter: "python3.11" }).command, "python3.11");
});

test("a relative setting without a folder is ignored with a message", () => {
  const launch = resolveLaunch({ ...base, interpreter: ".venv/bin/python", workspaceFolder: undefined });
  assert.equal(launch.command, "python3");
  assert.equal(launch.warnings.length, 1);
  assert.match(launch.warnings[0] ?? "", /relative/);
});

test("${workspaceFolder} without a folder is ignored with a message", () => {
  const launch = resolveLaunch({ ...base, interpreter: "${workspaceFolder}/py", workspaceFolder: undefined });
  assert.equal(launch.source, "default");
  assert.match(launch.warnings[0] ?? "", /no folder is open/);
});

test("a non-string interpreter is ignored with a message", () => {
  const launch = resolveLaunch({ ...base, interpreter: 3, pythonExtensionInterpreter: "/envs/a/bin/python" });
  assert.equal(launch.source, "python-extension");
  assert.match(launch.warnings[0] ?? "", /must be a path string/);
});

test("extra args follow the module", () => {
  const launch = resolveLaunch({ ...base, args: ["--log-level", "debug"] });
  assert.deepEqual(launch.args, ["-m", "infrarsi_server", "--log-level", "debug"]);
  assert.deepEqual(launch.warnings, []);
});

test("args that are not a list are ignored; non-strings in the list are dropped", () => {
  const notList = resolveLaunch({ ...base, args: "--verbose" });
  assert.deepEqual(notList.args, ["-m", "infrarsi_server"]);
  assert.match(notList.warnings[0] ?? "", /list of strings/);

  const mixed = resolveLaunch({ ...base, args: ["--verbose", 2, null] });
  assert.deepEqual(mixed.args, ["-m", "infrarsi_server", "--verbose"]);
  assert.match(mixed.warnings[0] ?? "", /\[2,null\]/);
});

test("sameLaunch compares command and every argument", () => {
  const a = resolveLaunch({ ...base, args: ["-v"] });
  assert.ok(sameLaunch(a, resolveLaunch({ ...base, args: ["-v"] })));
  assert.ok(!sameLaunch(a, resolveLaunch({ ...base, args: ["-q"] })));
  assert.ok(!sameLaunch(a, resolveLaunch({ ...base, args: ["-v"], interpreter: "/py" })));
});
