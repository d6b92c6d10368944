#!/usr/bin/env bash
# Builds, checks, tests and packages the VS Code extension from a clean checkout.
# Prints the .vsix path and size; any failing step fails the script.
set -euo pipefail
cd "$(dirname "$0")"

npm ci --no-audit --no-fund
npm run lint
npm run build
npm test
vsix="infrarsi-$(node -p 'require("./package.json").version').vsix"
# esbuild has bundled the dependencies, so the package carries none of node_modules.
npx vsce package --no-dependencies --out "$vsix"
echo "vsix: $PWD/$vsix ($(stat -c %s "$vsix") bytes)"
