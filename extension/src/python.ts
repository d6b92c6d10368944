// The interpreter selected in the Python extension (ms-python.python), read through its public
// `environments` API. Typed here by the few members used, rather than by adding its npm package.

import * as vscode from "vscode";

interface EnvironmentPath {
  readonly id: string;
  readonly path: string;
}

interface PythonExtensionApi {
  readonly environments: {
    getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
    resolveEnvironment(environment: EnvironmentPath): Promise<{ readonly executable: { readonly uri: vscode.Uri | undefined } } | undefined>;
    readonly onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

const PYTHON_EXTENSION_ID = "ms-python.python";

async function pythonApi(): Promise<PythonExtensionApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionApi | undefined>(PYTHON_EXTENSION_ID);
  if (extension === undefined) {
    return undefined;
  }
  const api = extension.isActive ? extension.exports : await extension.activate();
  // Older releases of the Python extension have no `environments` API.
  return api?.environments === undefined ? undefined : api;
}

/** The selected interpreter's executable for `resource`, or undefined when it cannot be had. */
export async function selectedInterpreter(resource: vscode.Uri | undefined, log: vscode.OutputChannel): Promise<string | undefined> {
  try {
    const api = await pythonApi();
    if (api === undefined) {
      return undefined;
    }
    const active = api.environments.getActiveEnvironmentPath(resource);
    // `path` may name an environment folder (conda); the resolved executable is what can be run.
    const resolved = await api.environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath ?? active.path;
  } catch (error) {
    log.appendLine(`Could not read the Python extension's interpreter: ${String(error)}`);
    return undefined;
  }
}

/** Calls `listener` when the user picks another interpreter in the Python extension. */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  try {
    return (await pythonApi())?.environments.onDidChangeActiveEnvironmentPath(listener);
  } catch {
    return undefined;
  }
}
