// Opens the report the server names: report.md in the built-in Markdown preview (which resolves
// the plots' relative paths itself), report.html in a webview.

import * as path from "node:path";
import * as vscode from "vscode";
import type { ReportView } from "./report";
import { reportHtmlForWebview } from "./webviewHtml";

let htmlPanel: vscode.WebviewPanel | undefined;

export async function openReport(view: ReportView): Promise<void> {
  const uri = vscode.Uri.file(view.path);
  if (view.kind === "markdown") {
    try {
      await vscode.commands.executeCommand("markdown.showPreview", uri);
    } catch {
      // The built-in Markdown extension can be disabled; the text still reads well.
      await vscode.window.showTextDocument(uri, { preview: false });
    }
    return;
  }
  await showHtml(uri);
}

async function showHtml(uri: vscode.Uri): Promise<void> {
  const folder = vscode.Uri.file(path.dirname(uri.fsPath));
  const html = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
  // One panel, reused: showing the report again after a new run replaces it instead of piling up tabs.
  if (htmlPanel === undefined) {
    htmlPanel = vscode.window.createWebviewPanel("infrarsi.report", "InfraRSI Report", vscode.ViewColumn.Active, {
      enableScripts: false,
      localResourceRoots: [folder],
    });
    htmlPanel.onDidDispose(() => {
      htmlPanel = undefined;
    });
  } else {
    htmlPanel.webview.options = { enableScripts: false, localResourceRoots: [folder] };
    htmlPanel.reveal();
  }
  const webview = htmlPanel.webview;
  webview.html = reportHtmlForWebview(html, webview.asWebviewUri(folder).toString(), webview.cspSource);
}
