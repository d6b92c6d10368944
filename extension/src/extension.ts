// Entry point: starts the InfraRSI language server when a Python file opens (or a palette command
// runs) and wires the palette commands to it.

import * as vscode from "vscode";
import { registerCommands } from "./commands";
import { onInterpreterChange } from "./python";
import { InfraRsiServer } from "./server";

let server: InfraRsiServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("InfraRSI");
  const current = new InfraRsiServer(output);
  server = current;
  context.subscriptions.push(output, current, ...registerCommands(current, output));

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((event) => {
      // The trace level is read live by the client; only launch settings need a new process.
      if (event.affectsConfiguration("infrarsi.python.interpreter") || event.affectsConfiguration("infrarsi.server.args")) {
        void current.restart().catch((error: unknown) => output.appendLine(`Restart failed: ${String(error)}`));
      }
    }),
  );
  const interpreterChanged = await onInterpreterChange(() => {
    if (current.interpreterSource === "python-extension") {
      void current.restart().catch((error: unknown) => output.appendLine(`Restart failed: ${String(error)}`));
    }
  });
  if (interpreterChanged !== undefined) {
    context.subscriptions.push(interpreterChanged);
  }

  // A server that cannot start is explained to the user by InfraRsiServer; activation itself
  // succeeds so that the palette commands stay available to retry after fixing the setting.
  current.ready().catch((error: unknown) => output.appendLine(`Start failed: ${String(error)}`));
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
