// package.json is what VS Code reads; it must agree with ids.ts and the settings config.ts reads.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { CLIENT_COMMANDS, SERVER_COMMANDS } from "../src/ids";

interface Manifest {
  name: string;
  publisher: string;
  main: string;
  engines: { vscode: string };
  activationEvents: string[];
  contributes: {
    commands: { command: string; title: string; category: string }[];
    configuration: { properties: Record<string, { type: string; default: unknown }> };
  };
  dependencies: Record<string, string>;
}

// Tests run from out/test/, two levels below the extension folder.
const manifest = JSON.parse(readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8")) as Manifest;

test("contributes exactly the palette commands, with their titles", () => {
  const titles = Object.fromEntries(manifest.contributes.commands.map((c) => [c.command, `${c.category}: ${c.title}`]));
  assert.deepEqual(titles, {
    [CLIENT_COMMANDS.optimize]: "InfraRSI: Optimize",
    [CLIENT_COMMANDS.apply]: "InfraRSI: Apply Promoted Changes",
    [CLIENT_COMMANDS.showReport]: "InfraRSI: Show Report",
    [CLIENT_COMMANDS.restartServer]: "InfraRSI: Restart Server",
  });
});

test("no server command is contributed to the palette", () => {
  const contributed = manifest.contributes.commands.map((c) => c.command);
  for (const id of Object.values(SERVER_COMMANDS)) {
    assert.ok(!contributed.includes(id), id);
  }
});

test("activates on Python files and on every palette command", () => {
  assert.ok(manifest.activationEvents.includes("onLanguage:python"));
  for (const id of Object.values(CLIENT_COMMANDS)) {
    assert.ok(manifest.activationEvents.includes(`onCommand:${id}`), id);
  }
});

test("declares the settings the extension reads", () => {
  const properties = manifest.contributes.configuration.properties;
  assert.equal(properties["infrarsi.python.interpreter"]?.default, "");
  assert.deepEqual(properties["infrarsi.server.args"]?.default, []);
  assert.equal(properties["infrarsi.trace.server"]?.default, "off");
});

test("identity and entry point match what vsce and VS Code expect", () => {
  assert.equal(manifest.name, "infrarsi");
  assert.equal(manifest.publisher, "infrarsi");
  assert.equal(manifest.engines.vscode, "^1.90.0");
  assert.equal(manifest.main, "./dist/extension.js");
  // Bundled by esbuild: the language client, and the protocol it is built on for the vscode-free modules.
  assert.deepEqual(Object.keys(manifest.dependencies).sort(), ["vscode-languageclient", "vscode-languageserver-protocol"]);
});
