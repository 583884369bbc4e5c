#!/usr/bin/env bash
# Installs a newer PyTorch (pinned, CUDA wheel from PyPI with its
# dependencies, several GB) into a private, git-ignored virtual environment
# on top of Debian's /usr/bin/python3, for the benchmarks' peers that
# Debian's torch 1.13 cannot run: bench/bench_dp.py's FSDP (torch 1.13's
# FSDP fails at import under Python 3.11 and refuses CPU-only execution).
# The tests never use it. Nothing goes into the system's site-packages.
#
#   scripts/install-bench-torch.sh        # into <repo>/.venv-bench-torch
#   DSC_BENCH_VENV=/some/dir scripts/install-bench-torch.sh
#
# Idempotent (a stamp lists the pin); a cut-off run never looks done (the
# environment is built in a temporary directory and moved into place).
# Never fails: where pip or the network is missing it says why and exits 0
# (the benchmark then reports FSDP as n/a with the reason). pip is bounded by
# DSC_BENCH_TORCH_TIMEOUT seconds (default 900).
#
# Why torch 2.4.1: FSDP runs on CPU with gloo (device_id cpu) there, and its
# wheels exist for Python 3.11. The wheel is a CUDA build; on a machine
# without a GPU it runs on the CPU.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${DSC_BENCH_VENV:-$ROOT/.venv-bench-torch}
PY=/usr/bin/python3
LIMIT=${DSC_BENCH_TORCH_TIMEOUT:-900}
PIN=torch==2.4.1

say() { echo "install-bench-torch: $*"; }

if [ -f "$DEST/.dsc-pin" ] && [ "$(cat "$DEST/.dsc-pin")" = "$PIN" ]; then
  say "already installed in $DEST"
  exit 0
fi
if [ ! -x "$PY" ] || ! "$PY" -c "import venv, ensurepip" >/dev/null 2>&1; then
  say "not installed: $PY lacks venv or ensurepip (apt-get install python3-venv)"
  exit 0
fi
TMP=$(mktemp -d "$DEST.tmp.XXXXXX") || { say "not installed: mktemp failed"; exit 0; }
LOG="$TMP.log"
trap 'rm -rf "$TMP" "$LOG"' EXIT
# Debian's numpy and safetensors stay visible; the venv's torch shadows
# Debian's.
if ! "$PY" -m venv --system-site-packages "$TMP" >"$LOG" 2>&1; then
  say "not installed: venv failed:"; tail -n 5 "$LOG" | sed 's/^/  /'; exit 0
fi
say "installing $PIN into $DEST (at most ${LIMIT}s)"
PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  timeout --kill-after=10 "$LIMIT" "$TMP/bin/python" -m pip install \
  --only-binary=:all: --no-input --quiet "$PIN" >"$LOG" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  say "not installed: pip exited $rc:"; tail -n 5 "$LOG" | sed 's/^/  /'; exit 0
fi
echo "$PIN" >"$TMP/.dsc-pin"
rm -rf "$DEST"
# Only its bin/python is used, which finds the environment beside it wherever
# it lies (the scripts pip wrote name the temporary path).
if mv -T "$TMP" "$DEST" 2>/dev/null; then
  say "installed in $DEST"
else
  say "not installed: could not move the environment into $DEST"
fi
exit 0
