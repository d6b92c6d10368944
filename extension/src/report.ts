// Which report file to open, decided from the reply of `infrarsi.server.report`.
// The server answers {path, summary}; path names `.infrarsi/report.md` or `.infrarsi/report.html`.

import * as path from "node:path";

export type ReportKind = "markdown" | "html";

export interface ReportView {
  kind: ReportKind;
  /** Absolute path of the file to open. */
  path: string;
  summary: string;
}

export type ReportChoice = { ok: true; view: ReportView } | { ok: false; message: string };

const KIND_BY_EXTENSION: Readonly<Record<string, ReportKind>> = {
  ".md": "markdown",
  ".markdown": "markdown",
  ".html": "html",
  ".htm": "html",
};

export function chooseReport(reply: unknown, workspaceFolder: string): ReportChoice {
  // The server answers null when no run has finished in this folder yet.
  if (reply === null || reply === undefined) {
    return { ok: false, message: "There is no report yet: run “InfraRSI: Optimize” first." };
  }
  if (typeof reply !== "object" || Array.isArray(reply)) {
    return { ok: false, message: `The server's report reply is not an object: ${JSON.stringify(reply)}.` };
  }
  const { path: rawPath, summary } = reply as { path?: unknown; summary?: unknown };
  if (typeof rawPath !== "string" || rawPath.trim().length === 0) {
    return { ok: false, message: "The server's report reply has no path." };
  }
  const kind = KIND_BY_EXTENSION[path.extname(rawPath).toLowerCase()];
  if (kind === undefined) {
    return { ok: false, message: `Cannot show ${rawPath}: expected a .md or .html report.` };
  }
  return {
    ok: true,
    view: {
      kind,
      path: path.resolve(workspaceFolder, rawPath),
      summary: typeof summary === "string" ? summary : "",
    },
  };
}

/** One line for a notification after optimize or apply: the server's summary when it sent one. */
export function describeReply(title: string, reply: unknown): string {
  if (reply !== null && typeof reply === "object" && !Array.isArray(reply)) {
    const { summary } = reply as { summary?: unknown };
    if (typeof summary === "string" && summary.trim().length > 0) {
      return `${title}: ${summary.trim()}`;
    }
  }
  return `${title}: done.`;
}
