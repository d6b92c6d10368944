// How the server is launched, resolved from the user's settings with fallbacks.
// Kept free of the `vscode` module so it can be tested under plain node.

import * as path from "node:path";

export const SERVER_MODULE = "infrarsi_server";
export const DEFAULT_INTERPRETER = "python3";

export interface LaunchSettings {
  /** `infrarsi.python.interpreter` as read from the configuration (any JSON value). */
  interpreter: unknown;
  /** `infrarsi.server.args` as read from the configuration (any JSON value). */
  args: unknown;
  /** The interpreter selected in the Python extension, when it is installed and has one. */
  pythonExtensionInterpreter: string | undefined;
  /** The folder the server works for; relative paths and `${workspaceFolder}` resolve against it. */
  workspaceFolder: string | undefined;
  home: string;
}

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface ServerLaunch {
  command: string;
  args: string[];
  source: InterpreterSource;
  /** One line per setting that was ignored, for the output channel and a warning. */
  warnings: string[];
}

export function resolveLaunch(settings: LaunchSettings): ServerLaunch {
  const warnings: string[] = [];
  const fromSetting = interpreterFromSetting(settings, warnings);
  let command: string;
  let source: InterpreterSource;
  if (fromSetting !== undefined) {
    command = fromSetting;
    source = "setting";
  } else if (settings.pythonExtensionInterpreter) {
    command = settings.pythonExtensionInterpreter;
    source = "python-extension";
  } else {
    command = DEFAULT_INTERPRETER;
    source = "default";
  }
  return { command, args: ["-m", SERVER_MODULE, ...extraArgs(settings.args, warnings)], source, warnings };
}

/** Two launches are the same when a running server can be restarted in place. */
export function sameLaunch(a: ServerLaunch, b: ServerLaunch): boolean {
  return a.command === b.command && a.args.length === b.args.length && a.args.every((arg, i) => arg === b.args[i]);
}

function interpreterFromSetting(settings: LaunchSettings, warnings: string[]): string | undefined {
  const raw = settings.interpreter;
  if (raw === undefined || raw === null) {
    return undefined;
  }
  if (typeof raw !== "string") {
    warnings.push(`infrarsi.python.interpreter must be a path string, not ${JSON.stringify(raw)}; ignoring it.`);
    return undefined;
  }
  let value = raw.trim();
  if (value.length === 0) {
    return undefined;
  }
  if (value.includes("${workspaceFolder}")) {
    if (settings.workspaceFolder === undefined) {
      warnings.push(`infrarsi.python.interpreter uses \${workspaceFolder} but no folder is open; ignoring "${raw}".`);
      return undefined;
    }
    value = value.split("${workspaceFolder}").join(settings.workspaceFolder);
  }
  if (value === "~" || value.startsWith("~/")) {
    value = path.join(settings.home, value.slice(1));
  }
  // A bare name such as "python3.11" is looked up on PATH by the OS; only a path with a
  // directory part is anchored to the workspace.
  const hasDirectory = value.includes("/") || value.includes("\\");
  if (hasDirectory && !path.isAbsolute(value)) {
    if (settings.workspaceFolder === undefined) {
      warnings.push(`infrarsi.python.interpreter "${raw}" is relative but no folder is open; ignoring it.`);
      return undefined;
    }
    value = path.join(settings.workspaceFolder, value);
  }
  return value;
}

function extraArgs(raw: unknown, warnings: string[]): string[] {
  if (raw === undefined || raw === null) {
    return [];
  }
  if (!Array.isArray(raw)) {
    warnings.push(`infrarsi.server.args must be a list of strings, not ${JSON.stringify(raw)}; ignoring it.`);
    return [];
  }
  const strings = raw.filter((item): item is string => typeof item === "string");
  if (strings.length !== raw.length) {
    const dropped = raw.filter((item) => typeof item !== "string");
    warnings.push(`infrarsi.server.args holds non-strings ${JSON.stringify(dropped)}; dropping them.`);
  }
  return strings;
}
