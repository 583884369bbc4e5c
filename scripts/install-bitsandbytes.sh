#!/usr/bin/env bash
# Installs bitsandbytes (pinned) for Debian's /usr/bin/python3 (or
# DSC_TORCH_PYTHON) into a private, git-ignored directory, for
# test/reference/check_optimizers.py --peer bitsandbytes, which compares
# dsc's Adam8bit/AdamW8bit with bitsandbytes' own optimizer on the CPU.
# Nothing goes into the system's site-packages.
#
#   scripts/install-bitsandbytes.sh            # into <repo>/.pydeps-bitsandbytes
#   DSC_PYDEPS_BNB=/some/dir scripts/install-bitsandbytes.sh
#
# Why 0.50.2: bitsandbytes runs its 8-bit optimizers on CPU tensors only
# from 0.47 on (a torch implementation of the block-wise update around its
# C quantizer), and those versions need torch >= 2.4. Debian 12's
# python3-torch is 1.13, so where the interpreter's torch is older this
# says so and installs nothing (the comparison then reports SKIP with the
# reason). Otherwise as scripts/install-transformers.sh: idempotent (a
# stamp lists the pins), built in a temporary directory and moved into
# place whole, never fails, pip bounded by DSC_PYDEPS_TIMEOUT seconds
# (default 120), wheels only.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${DSC_PYDEPS_BNB:-$ROOT/.pydeps-bitsandbytes}
PY=${DSC_TORCH_PYTHON:-/usr/bin/python3}
LIMIT=${DSC_PYDEPS_TIMEOUT:-120}
PINS=(bitsandbytes==0.50.2)
STAMP_TEXT=$(printf '%s\n' "${PINS[@]}")

. "$ROOT/scripts/lib/pip-target.sh"
say() { echo "install-bitsandbytes: $*"; }

if [ -f "$DEST/.dsc-pins" ] && [ "$(cat "$DEST/.dsc-pins")" = "$STAMP_TEXT" ]; then
  say "already installed in $DEST"
  exit 0
fi
if [ ! -x "$PY" ]; then
  say "not installed: no $PY"
  exit 0
fi
TORCH=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)
if [ -z "$TORCH" ]; then
  say "not installed: $PY cannot import torch"
  exit 0
fi
if ! "$PY" -c 'import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(0 if v >= (2, 4) else 1)' 2>/dev/null; then
  say "not installed: bitsandbytes' CPU optimizers need torch >= 2.4; $PY has torch $TORCH"
  exit 0
fi
pip_install_pins
