#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): init, doctor, a deliberate OOM trial and a short optimize on
# GPU-sized dense_gpt and moe_gpt, records and a one-page table to $OUT.
#
#   bench/gpu_check.sh --prepare   here, where PyPI is reachable: the project's dependencies that the
#                                  device image lacks, as Python 3.12 wheels, into .whl/ (ignored)
#   bench/gpu_check.sh             on the GPU machine (device tool: carry [".whl"], timeout_s 600);
#                                  about 8 minutes: ~30 s of installs, then a 480 s deadline
#   bench/gpu_check.sh --dry       the same steps on CPU at tiny sizes, nothing installed (~3-8 min)
#
# Installs on the GPU machine: torch 2.13.0 (pinned) when a package registry is reachable from it;
# the device image reaches none and a CUDA torch is far over what a call may carry, so there the
# image's own CUDA torch runs the check and the table says which. The project is put on PYTHONPATH,
# its missing dependencies come from the carried wheels (or from the registry when one answers).
# Environment: OUT (default .gpu_check/out), GPU_CHECK_WORK (default /tmp/gpu_check),
# GPU_CHECK_PYTHON (default python3; --dry: .venv/bin/python when it exists).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
TORCH_VERSION=2.13.0
# Dependencies of the CLI that the device image (KINDS.md of the device tool) does not have, with
# what they need in turn; numpy, scipy, scikit-learn, psutil, matplotlib, rich, PyYAML, tqdm and
# MarkupSafe are there. The language server's and the Anthropic client's are not needed here.
CARRIED="libcst optuna alembic colorlog Mako SQLAlchemy GitPython gitdb smmap tomli_w"
WHEELS=.whl

mode=gpu
case "${1:-}" in
  --dry) mode=dry; shift ;;
  --prepare) mode=prepare; shift ;;
  -h|--help) sed -n "2,16p" "$0"; exit 0 ;;
esac

if [[ $mode == prepare ]]; then
  PY=${GPU_CHECK_PYTHON:-$ROOT/.venv/bin/python}
  mkdir -p "$WHEELS" && rm -f "$WHEELS"/*.whl
  pins=()
  for name in $CARRIED; do
    pin=$("$PY" -m pip list --format=freeze 2>/dev/null | grep -i "^${name//_/[-_]}==")
    [[ -n $pin ]] || { echo "gpu_check --prepare: $name is not installed in $PY's environment" >&2; exit 2; }
    pins+=("$pin")
  done
  # The device's python3 is CPython 3.12 on x86-64 (KINDS.md); libcst is the one compiled wheel.
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$WHEELS" "${pins[@]}" || exit 2
  git rev-parse --short HEAD > "$WHEELS/commit.txt" 2>/dev/null
  [[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || sed -i 's/$/+uncommitted/' "$WHEELS/commit.txt"
  echo "wheels for the device in $WHEELS/ ($(du -sh "$WHEELS" | cut -f1)): ${pins[*]}"
  echo 'now, on the device: run(command="bench/gpu_check.sh", carry=[".whl"], timeout_s=600)'
  exit 0
fi

OUT=${OUT:-$ROOT/.gpu_check/out}
WORK=${GPU_CHECK_WORK:-/tmp/gpu_check}
mkdir -p "$OUT" "$WORK"

if [[ $mode == dry ]]; then
  PY=${GPU_CHECK_PYTHON:-python3}
  [[ -n ${GPU_CHECK_PYTHON:-} || ! -x $ROOT/.venv/bin/python ]] || PY=$ROOT/.venv/bin/python
  exec "$PY" -m bench.gpu_check --dry --out "$OUT" --work "$WORK" "$@"
fi

PY=${GPU_CHECK_PYTHON:-python3}
notes=()
log=$WORK/install.log
: > "$log"

registry_up() {
  "$PY" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=5)' >/dev/null 2>&1
}

{
  echo "## nvidia-smi"; nvidia-smi 2>&1; nvidia-smi -q 2>&1 | head -120
  echo "## python"; "$PY" -c 'import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1
  echo "## pip list"; "$PY" -m pip list 2>&1
} > "$WORK/machine.txt"

have=$("$PY" -c 'import torch; print(torch.__version__, bool(torch.version.cuda) and torch.cuda.is_available())' 2>/dev/null)
online=no
registry_up && online=yes
echo "torch here: ${have:-none}; package registry reachable: $online" | tee -a "$log"
if [[ $have != "$TORCH_VERSION"*" True" ]]; then
  if [[ $online == yes ]]; then
    # A venv over the image's packages, with the pinned torch (PyPI's Linux x86-64 wheel is a CUDA build).
    "$PY" -m venv --system-site-packages "$WORK/venv" >>"$log" 2>&1 \
      && "$WORK/venv/bin/python" -m pip install --quiet "torch==$TORCH_VERSION" >>"$log" 2>&1 \
      && PY=$WORK/venv/bin/python \
      || notes+=("installing torch==$TORCH_VERSION failed (see install.log in gpu_check.tar.gz); the image's torch ${have%% *} ran the check")
  else
    notes+=("torch==$TORCH_VERSION not installed: no package registry is reachable from this machine and a CUDA torch is far over what a call may carry; the image's torch ${have%% *} ran the check")
  fi
fi

if [[ -d $WHEELS ]] && compgen -G "$WHEELS/*.whl" >/dev/null; then
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
    "$WHEELS"/*.whl >>"$log" 2>&1 || { echo "installing the carried wheels failed:"; tail -20 "$log"; exit 2; }
  export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH}
elif [[ $online == yes ]]; then
  "$PY" -m pip install --quiet "torch==$("$PY" -c 'import torch; print(torch.__version__)')" -e . >>"$log" 2>&1 \
    || { echo "installing the project failed:"; tail -20 "$log"; exit 2; }
fi
export PYTHONPATH=$ROOT:$ROOT/server${PYTHONPATH:+:$PYTHONPATH}
# Trials get an allow-listed environment without PYTHONPATH (docs/sandbox.md) and run this same
# interpreter, whose probe imports infrarsi: a .pth in its own site-packages makes the project and
# the carried wheels importable there too (the device machine is discarded after the call). Asked
# from /, since the checkout as the current directory would make it importable.
if ! (cd / && env -u PYTHONPATH "$PY" -c "import infrarsi") >/dev/null 2>&1; then
  site=$("$PY" -c 'import site; print(site.getsitepackages()[0])')
  printf '%s\n' "$WORK/site" "$ROOT" "$ROOT/server" > "$site/infrarsi-gpu-check.pth" \
    || { echo "cannot make the project importable for trials: $site is not writable"; exit 2; }
fi
if ! command -v git >/dev/null; then
  # GitPython refuses to import without a git executable; the check needs none (no apply).
  export GIT_PYTHON_REFRESH=quiet
  notes+=("no git on this machine: the fixtures' copies are plain directories")
fi
if ! "$PY" -c 'import infrarsi.cli, infrarsi.stages.run, infrarsi.report.plots' >>"$log" 2>&1; then
  echo "the project does not import here; run bench/gpu_check.sh --prepare where PyPI is reachable and carry .whl:"
  tail -5 "$log"
  exit 2
fi

# --prepare wrote the commit it ran at; the device copy's own .git need not be current.
commit=$(cat "$WHEELS/commit.txt" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
export GPU_CHECK_COMMIT=$commit GPU_CHECK_NOTES=$(printf '%s\n' "${notes[@]}")
export PYTHONUNBUFFERED=1
"$PY" -m bench.gpu_check --out "$OUT" --work "$WORK" "$@"
