import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "out/", "node_modules/", "*.vsix", "e2e/"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ["*.mjs"] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A promise dropped on the floor in an extension is an error the user never sees.
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/switch-exhaustiveness-check": "error",
      eqeqeq: "error",
    },
  },
  {
    // These modules are unit-tested under plain node, where `vscode` does not exist.
    files: ["src/config.ts", "src/goal.ts", "src/ids.ts", "src/progress.ts", "src/report.ts", "src/webviewHtml.ts", "src/workDoneRequest.ts"],
    rules: {
      "no-restricted-imports": ["error", { paths: [{ name: "vscode", message: "Keep this module free of vscode so node --test can load it." }] }],
    },
  },
  {
    files: ["test/**/*.ts"],
    rules: {
      // node:test runs the promise `test()` returns; awaiting each one would serialize nothing useful.
      "@typescript-eslint/no-floating-promises": ["error", { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: "test" }] }],
    },
  },
  {
    files: ["**/*.mjs"],
    ...tseslint.configs.disableTypeChecked,
  },
);
