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

. "$ROOT/scripts/lib/pip-target.sh"
say() { echo "install-transformers: $*"; }

if [ -f "$DEST/.dsc-pins" ] && [ "$(cat "$DEST/.dsc-pins")" = "$STAMP_TEXT" ]; then
  say "already installed in $DEST"
  exit 0
fi
if [ ! -x "$PY" ]; then
  say "not installed: no $PY"
  exit 0
fi
pip_install_pins
