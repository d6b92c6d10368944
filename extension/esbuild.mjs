// Bundles the extension and vscode-languageclient into one file, so the .vsix ships no node_modules.
// The source map is written for debugging and left out of the .vsix by .vscodeignore.
import * as esbuild from "esbuild";

await esbuild.build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "dist/extension.js",
  external: ["vscode"],
  format: "cjs",
  platform: "node",
  target: "node20",
  minify: true,
  sourcemap: true,
  logLevel: "warning",
});
