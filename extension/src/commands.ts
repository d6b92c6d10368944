// The palette commands. Each one asks the server to do the work through its own command id
// (see ids.ts) and shows the outcome; nothing is computed here.

import * as vscode from "vscode";
import { normalizeGoal, DEFAULT_GOAL, goalInputError } from "./goal";
import { CLIENT_COMMANDS, SERVER_COMMANDS } from "./ids";
import { chooseReport, describeReply } from "./report";
import { openReport } from "./reportView";
import type { InfraRsiServer } from "./server";
import { executeWithProgress, isCancellation } from "./workDone";

export function registerCommands(server: InfraRsiServer, output: vscode.OutputChannel): vscode.Disposable[] {
  const run = (title: string, body: () => Promise<void>) => async () => {
    try {
      await body();
    } catch (error) {
      await reportFailure(title, error, output);
    }
  };
  return [
    vscode.commands.registerCommand(CLIENT_COMMANDS.optimize, run("InfraRSI: Optimize", () => optimize(server, output))),
    vscode.commands.registerCommand(CLIENT_COMMANDS.apply, run("InfraRSI: Apply", () => apply(server, output))),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showReport, run("InfraRSI: Report", () => showReport(server, output))),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restartServer, run("InfraRSI: Restart", () => server.restart())),
  ];
}

async function optimize(server: InfraRsiServer, output: vscode.OutputChannel): Promise<void> {
  const folder = await pickFolder();
  if (folder === undefined) {
    return;
  }
  const typed = await vscode.window.showInputBox({
    title: "InfraRSI: Optimize",
    prompt: `What should the training job become? (${folder.name})`,
    value: DEFAULT_GOAL,
    validateInput: goalInputError,
  });
  if (typed === undefined) {
    return;
  }
  const goal = normalizeGoal(typed);
  if (!goal.ok) {
    // validateInput already refuses such input; this covers hosts that skip validation.
    void vscode.window.showErrorMessage(`InfraRSI: ${goal.message}`);
    return;
  }
  const client = await server.ready();
  const title = `InfraRSI: Optimize “${goal.goal}”`;
  const reply = await executeWithProgress(client, SERVER_COMMANDS.optimize, { workspace: folder.uri.fsPath, goal: goal.goal }, title);
  const showReportLabel = "Show Report";
  const outcome = describeReply("InfraRSI: Optimize", reply);
  output.appendLine(outcome);
  const choice = await vscode.window.showInformationMessage(outcome, showReportLabel);
  if (choice === showReportLabel) {
    await vscode.commands.executeCommand(CLIENT_COMMANDS.showReport);
  }
}

async function apply(server: InfraRsiServer, output: vscode.OutputChannel): Promise<void> {
  const folder = await pickFolder();
  if (folder === undefined) {
    return;
  }
  const applyLabel = "Apply";
  const choice = await vscode.window.showInformationMessage(
    `Apply the promoted changes to ${folder.name}?`,
    { modal: true, detail: "InfraRSI commits them on a new git branch; your current branch is left as it is." },
    applyLabel,
  );
  if (choice !== applyLabel) {
    return;
  }
  const client = await server.ready();
  const reply = await executeWithProgress(client, SERVER_COMMANDS.apply, { workspace: folder.uri.fsPath }, "InfraRSI: Apply");
  const outcome = describeReply("InfraRSI: Apply", reply);
  output.appendLine(outcome);
  void vscode.window.showInformationMessage(outcome);
}

async function showReport(server: InfraRsiServer, output: vscode.OutputChannel): Promise<void> {
  const folder = await pickFolder();
  if (folder === undefined) {
    return;
  }
  const client = await server.ready();
  const reply = await executeWithProgress(client, SERVER_COMMANDS.report, { workspace: folder.uri.fsPath }, "InfraRSI: Report");
  const choice = chooseReport(reply, folder.uri.fsPath);
  if (!choice.ok) {
    void vscode.window.showWarningMessage(`InfraRSI: ${choice.message}`);
    return;
  }
  if (choice.view.summary.length > 0) {
    output.appendLine(`Report ${choice.view.path}: ${choice.view.summary}`);
  }
  await openReport(choice.view);
}

/** The folder the command is for: the only one, the active editor's, or the user's pick. */
async function pickFolder(): Promise<vscode.WorkspaceFolder | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 0) {
    void vscode.window.showWarningMessage("InfraRSI: open the folder of a training repository first.");
    return undefined;
  }
  if (folders.length === 1) {
    return folders[0];
  }
  const active = vscode.window.activeTextEditor?.document.uri;
  const activeFolder = active === undefined ? undefined : vscode.workspace.getWorkspaceFolder(active);
  return activeFolder ?? vscode.window.showWorkspaceFolderPick({ placeHolder: "Training repository to work on" });
}

async function reportFailure(title: string, error: unknown, output: vscode.OutputChannel): Promise<void> {
  if (isCancellation(error)) {
    output.appendLine(`${title}: cancelled.`);
    void vscode.window.showInformationMessage(`${title}: cancelled.`);
    return;
  }
  const message = error instanceof Error ? error.message : String(error);
  output.appendLine(`${title} failed: ${message}`);
  const showOutput = "Show Output";
  if ((await vscode.window.showErrorMessage(`${title} failed: ${message}`, showOutput)) === showOutput) {
    output.show();
  }
}
