#!/usr/bin/env bash
# Installs Hugging Face transformers (pinned, with the few packages its model
# code imports) for Debian's /usr/bin/python3 into a private, git-ignored
# directory, for test/reference/check_transformers.py, which compares our
# PyTorch references (GPT-2, BERT, the LLaMA family) with transformers' own
# model code. Nothing goes into the system's site-packages.
#
#   scripts/install-transformers.sh            # into <repo>/.pydeps
#   DSC_PYDEPS=/some/dir scripts/install-transformers.sh
#
# Idempotent: a finished install leaves a stamp listing the pins, and a rerun
# with the same pins does nothing. An install is built in a temporary
# directory and moved into place whole, so a cut-off run never looks done.
# Never fails: where pip, the network or a wheel is missing it says why and
# exits 0 (the comparison then reports SKIP with the reason). pip is bounded
# by DSC_PYDEPS_TIMEOUT seconds (default 120).
#
# Why transformers 4.46.3: its LlamaForCausalLM has num_key_value_heads,
# head_dim, attention_bias, mlp_bias and rope_scaling "llama3", and it runs
# on Debian's torch 1.13 (eager attention) with its declared requirements
# met: from 4.48 on, transformers' own dependency table asks for torch >= 2.0
# (4.48.3 still happened to pass the comparison on torch 1.13, unpromised).
# Its configuration module imports tokenizers (via the GGUF integration), so
# tokenizers is needed although no tokenizer is used. --only-binary: wheels
# only, nothing is compiled here.
# peft 0.13.2 (with what it imports: accelerate, psutil, PyYAML, and Jinja2
# for the model card save_pretrained writes) is for check_peft.py, which
# exchanges LoRA adapters between dsc and PEFT; it supports torch 1.13.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${DSC_PYDEPS:-$ROOT/.pydeps}
PY=${DSC_TORCH_PYTHON:-/usr/bin/python3}
LIMIT=${DSC_PYDEPS_TIMEOUT:-120}
PINS=(
  transformers==4.46.3
  tokenizers==0.20.3
  huggingface_hub==0.26.5
  safetensors==0.4.5
  regex==2024.11.6
  packaging==24.2
  filelock==3.16.1
  tqdm==4.67.1
  fsspec==2024.10.0
  peft==0.13.2
  accelerate==0.34.2
  psutil==7.2.2
  PyYAML==6.0.3
  Jinja2==3.1.4
  MarkupSafe==2.1.5
)
STAMP_TEXT=$(printf '%s\n' "${PINS[@]}")

say() { echo "install-transformers: $*"; }

if [ -f "$DEST/.dsc-pins" ] && [ "$(cat "$DEST/.dsc-pins")" = "$STAMP_TEXT" ]; then
  say "already installed in $DEST"
  exit 0
fi
if [ ! -x "$PY" ]; then
  say "not installed: no $PY"
  exit 0
fi
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  say "not installed: $PY has no pip (apt-get install python3-pip)"
  exit 0
fi
if ! command -v timeout >/dev/null 2>&1; then
  say "not installed: no timeout(1) to bound pip"
  exit 0
fi

mkdir -p "$(dirname "$DEST")" || { say "not installed: cannot create $(dirname "$DEST")"; exit 0; }
TMP=$(mktemp -d "$DEST.tmp.XXXXXX") || { say "not installed: mktemp failed"; exit 0; }
LOG="$TMP.log"
trap 'rm -rf "$TMP" "$LOG"' EXIT

say "installing ${PINS[*]} into $DEST (at most ${LIMIT}s)"
PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  timeout --kill-after=10 "$LIMIT" "$PY" -m pip install --target "$TMP" \
  --no-deps --only-binary=:all: --no-input --no-warn-script-location \
  --no-compile --quiet "${PINS[@]}" >"$LOG" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "not installed: pip ran past ${LIMIT}s"
  else
    say "not installed: pip exited $rc:"
  fi
  tail -n 5 "$LOG" | sed 's/^/  /'
  exit 0
fi
printf '%s\n' "$STAMP_TEXT" >"$TMP/.dsc-pins"
# Replace an old or partial install; if another run finished first, keep its.
if [ -f "$DEST/.dsc-pins" ] && [ "$(cat "$DEST/.dsc-pins")" = "$STAMP_TEXT" ]; then
  say "already installed in $DEST (by a concurrent run)"
  exit 0
fi
rm -rf "$DEST"
if mv -T "$TMP" "$DEST" 2>/dev/null; then
  say "installed in $DEST"
else
  say "not installed: could not move the install into $DEST"
fi
exit 0
