// `workspace/executeCommand` with a work-done token, over any LSP connection.
//
// vscode-languageclient never puts a workDoneToken on executeCommand (it only shows progress the
// server creates with window/workDoneProgress/create), so a command run through
// `vscode.commands.executeCommand` would show nothing for a run that takes minutes. Here the
// request carries a token and `$/progress` on it is routed to `onStep`.
//
// pygls 2 passes a command handler only `arguments`, not the request's workDoneToken, so the
// token is also put into the argument object, where the server reads it.

import {
  type CancellationToken,
  type Disposable,
  ExecuteCommandRequest,
  type ExecuteCommandParams,
  type NotificationHandler,
  type ProgressToken,
  type ProgressType,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  type WorkDoneProgressCancelParams,
} from "vscode-languageserver-protocol";
import { type ProgressStep, WorkDoneTracker } from "./progress";

/** What is used of a connection; both `LanguageClient` and a protocol connection provide it. */
export interface CommandChannel {
  sendRequest(type: typeof ExecuteCommandRequest.type, params: ExecuteCommandParams, token?: CancellationToken): Promise<unknown>;
  sendNotification(type: typeof WorkDoneProgressCancelNotification.type, params: WorkDoneProgressCancelParams): Promise<void>;
  onProgress<P>(type: ProgressType<P>, token: ProgressToken, handler: NotificationHandler<P>): Disposable;
}

export interface CommandArguments {
  workspace: string;
  [key: string]: unknown;
}

export async function executeCommandWithWorkDone(
  channel: CommandChannel,
  command: string,
  argument: CommandArguments,
  workDoneToken: string,
  onStep: (step: ProgressStep) => void,
  cancellation?: CancellationToken,
): Promise<unknown> {
  const tracker = new WorkDoneTracker();
  const listening = channel.onProgress(WorkDoneProgress.type, workDoneToken, (value) => {
    const step = tracker.step(value);
    if (step !== undefined) {
      onStep(step);
    }
  });
  // Cancel both ways a server may watch: the request itself ($/cancelRequest, sent when the
  // token passed to sendRequest fires) and the work-done progress it reports on.
  const cancelling = cancellation?.onCancellationRequested(() => {
    void channel.sendNotification(WorkDoneProgressCancelNotification.type, { token: workDoneToken });
  });
  try {
    const params: ExecuteCommandParams = { command, arguments: [{ ...argument, workDoneToken }], workDoneToken };
    return await channel.sendRequest(ExecuteCommandRequest.type, params, cancellation);
  } finally {
    listening.dispose();
    cancelling?.dispose();
  }
}
