// Command ids on both sides of the wire.
//
// The palette ids (contributed in package.json) and the server ids must differ: vscode-languageclient
// registers every command the server announces in `executeCommandProvider` as a VS Code command,
// and VS Code refuses a second registration of the same id. esbonio keeps them apart the same way
// (`esbonio.preview.open` → `esbonio.server.previewFile`).

export const CLIENT_COMMANDS = {
  optimize: "infrarsi.optimize",
  apply: "infrarsi.apply",
  showReport: "infrarsi.showReport",
  restartServer: "infrarsi.restartServer",
} as const;

export const SERVER_COMMANDS = {
  optimize: "infrarsi.server.optimize",
  apply: "infrarsi.server.apply",
  report: "infrarsi.server.report",
} as const;

export type ClientCommand = (typeof CLIENT_COMMANDS)[keyof typeof CLIENT_COMMANDS];
export type ServerCommand = (typeof SERVER_COMMANDS)[keyof typeof SERVER_COMMANDS];

/** The server command each palette command sends; restart is handled by the client alone. */
export const SERVER_COMMAND_FOR: Readonly<Partial<Record<ClientCommand, ServerCommand>>> = {
  [CLIENT_COMMANDS.optimize]: SERVER_COMMANDS.optimize,
  [CLIENT_COMMANDS.apply]: SERVER_COMMANDS.apply,
  [CLIENT_COMMANDS.showReport]: SERVER_COMMANDS.report,
};

/** Throws naming every id that appears on both sides. */
export function assertDistinct(client: readonly string[], server: readonly string[]): void {
  const shared = client.filter((id) => server.includes(id));
  if (shared.length > 0) {
    throw new Error(`command ids registered on both client and server: ${shared.join(", ")}`);
  }
}

// Checked at load so a clash fails on activation, not on the first click.
assertDistinct(Object.values(CLIENT_COMMANDS), Object.values(SERVER_COMMANDS));
