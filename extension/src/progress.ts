// Turns LSP work-done progress values into what a VS Code progress notification takes.
// VS Code wants increments, LSP sends absolute percentages; tracking the total reported so far
// converts one to the other (the same arithmetic as vscode-languageclient's own ProgressPart).

import type { WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from "vscode-languageserver-protocol";

export interface ProgressStep {
  message?: string;
  increment?: number;
}

export class WorkDoneTracker {
  private reported = 0;

  /** The step to show for one `$/progress` value; undefined when there is nothing to show. */
  step(value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd): ProgressStep | undefined {
    if (value.kind === "end") {
      return value.message === undefined ? undefined : { message: value.message };
    }
    // A begin's title names the phase ("doctor", "run") when there is no message yet.
    const message = value.message ?? (value.kind === "begin" ? value.title : undefined);
    if (value.percentage === undefined) {
      return message === undefined ? undefined : { message };
    }
    const percentage = Math.max(0, Math.min(value.percentage, 100));
    const increment = Math.max(0, percentage - this.reported);
    this.reported += increment;
    return message === undefined ? { increment } : { message, increment };
  }
}
