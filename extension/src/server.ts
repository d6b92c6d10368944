// The language client and the server process behind it: start, restart, stop.

import * as os from "node:os";
import * as vscode from "vscode";
import { LanguageClient, type LanguageClientOptions, type ServerOptions, TransportKind } from "vscode-languageclient/node";
import { resolveLaunch, sameLaunch, type ServerLaunch } from "./config";
import { selectedInterpreter } from "./python";

const CLIENT_ID = "infrarsi"; // also the prefix of `infrarsi.trace.server`, which the client reads
const CLIENT_NAME = "InfraRSI";

export class InfraRsiServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private launch: ServerLaunch | undefined;
  // Start, restart and stop run one at a time: a palette command arriving during a restart
  // must wait for it rather than start a second server beside it.
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly output: vscode.OutputChannel) {}

  /** Where the launch came from, so a change of Python interpreter restarts only when it matters. */
  get interpreterSource(): ServerLaunch["source"] | undefined {
    return this.launch?.source;
  }

  /** The running client, starting the server first when it is not running. */
  ready(): Promise<LanguageClient> {
    return this.serialize(async () => {
      const client = this.client;
      return client?.isRunning() ? client : this.start();
    });
  }

  /** Restarts in place when the launch settings are unchanged, else replaces the client. */
  restart(): Promise<void> {
    return this.serialize(async () => {
      const launch = await this.resolve();
      if (this.client !== undefined && this.launch !== undefined && sameLaunch(launch, this.launch)) {
        this.output.appendLine("Restarting the InfraRSI server.");
        await this.client.restart();
        return;
      }
      await this.start();
    });
  }

  stop(): Promise<void> {
    return this.serialize(() => this.stopNow());
  }

  dispose(): void {
    void this.stop();
  }

  private serialize<T>(operation: () => Promise<T>): Promise<T> {
    const result = this.queue.then(operation, operation);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async stopNow(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.launch = undefined;
    if (client !== undefined) {
      // dispose() stops a running server and frees the client's handlers; our output channel,
      // passed in, stays open.
      await client.dispose();
    }
  }

  private async start(): Promise<LanguageClient> {
    await this.stopNow();
    const launch = await this.resolve();
    for (const warning of launch.warnings) {
      this.output.appendLine(`Warning: ${warning}`);
      void vscode.window.showWarningMessage(`InfraRSI: ${warning}`);
    }
    this.output.appendLine(`Starting the InfraRSI server: ${launch.command} ${launch.args.join(" ")} (interpreter from ${launch.source})`);
    const client = createClient(launch, this.output);
    this.client = client;
    this.launch = launch;
    try {
      await client.start();
    } catch (error) {
      this.output.appendLine(`The server did not start: ${String(error)}`);
      void explainStartFailure(launch, this.output);
      throw error;
    }
    return client;
  }

  private async resolve(): Promise<ServerLaunch> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const config = vscode.workspace.getConfiguration("infrarsi", folder?.uri);
    return resolveLaunch({
      interpreter: config.get<unknown>("python.interpreter"),
      args: config.get<unknown>("server.args"),
      pythonExtensionInterpreter: await selectedInterpreter(folder?.uri, this.output),
      workspaceFolder: folder?.uri.fsPath,
      home: os.homedir(),
    });
  }
}

function createClient(launch: ServerLaunch, output: vscode.OutputChannel): LanguageClient {
  const serverOptions: ServerOptions = {
    command: launch.command,
    args: launch.args,
    transport: TransportKind.stdio,
    options: { cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "python" }],
    // The trace of `infrarsi.trace.server` goes to the same channel.
    outputChannel: output,
  };
  return new InfraRsiLanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
}

/**
 * The client logs every exit of the server process as an error, a restart's or a stop's clean
 * exit (code 0) included; that one is an info line in the Output panel.
 */
class InfraRsiLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown, showNotification: boolean | "force" = true): void {
    if (isCleanExit(message)) {
      this.info("Server process exited normally (code 0).", undefined, false);
      return;
    }
    super.error(message, data, showNotification);
  }
}

function isCleanExit(message: string): boolean {
  return message === "Server process exited with code 0.";
}

async function explainStartFailure(launch: ServerLaunch, output: vscode.OutputChannel): Promise<void> {
  const openSettings = "Open Settings";
  const showOutput = "Show Output";
  const choice = await vscode.window.showErrorMessage(
    `InfraRSI: the server did not start with "${launch.command} ${launch.args.join(" ")}". ` +
      "Set infrarsi.python.interpreter to a Python that has infrarsi installed.",
    openSettings,
    showOutput,
  );
  if (choice === openSettings) {
    await vscode.commands.executeCommand("workbench.action.openSettings", "infrarsi.python.interpreter");
  } else if (choice === showOutput) {
    output.show();
  }
}
