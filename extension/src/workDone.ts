// Runs a server command under a cancellable progress notification fed by the server's
// work-done progress (see workDoneRequest.ts for why the request carries its own token).

import { randomUUID } from "node:crypto";
import * as vscode from "vscode";
import { LSPErrorCodes, type LanguageClient, ResponseError } from "vscode-languageclient/node";
import { type CommandArguments, executeCommandWithWorkDone } from "./workDoneRequest";

export function executeWithProgress(client: LanguageClient, command: string, argument: CommandArguments, title: string): Thenable<unknown> {
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (progress, cancellation) =>
    executeCommandWithWorkDone(client, command, argument, `infrarsi-${randomUUID()}`, (step) => progress.report(step), cancellation),
  );
}

/** True for the error a request ends with when the user cancelled it. */
export function isCancellation(error: unknown): boolean {
  return (
    error instanceof vscode.CancellationError ||
    (error instanceof ResponseError && (error.code === LSPErrorCodes.RequestCancelled || error.code === LSPErrorCodes.ServerCancelled))
  );
}
