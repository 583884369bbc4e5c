#!/usr/bin/env bash
# GPU test (ctest label gpu): the torch extensions that dsc-translate
# --emit-torch-extension writes for GPT-2 tiny's fp32 and bf16 steps
# JIT-build with the machine's PyTorch, and their LayerNorm (f32, bf16),
# LayerNorm backward, fused causal attention (against SDPA), bias+GELU(tanh)
# and cross-entropy launchers match torch ops; a bad label is reported by take_status(), a
# wrong shape by name (torch_ext_gpu.py, which holds the tolerances).
#
#   torch-extension-gpu.sh BIN_DIR SOURCE_DIR
#
# PyTorch: $DSC_TORCH_CUDA_PYTHON, else python3. Exits 77 (skipped) with
# the reason when it has no CUDA device or no CUDA toolkit to build with.
set -euo pipefail
bin=$1
src=$2
python=${DSC_TORCH_CUDA_PYTHON:-python3}

if ! why=$("$python" - 2>&1 <<'PY'
import sys
try:
    import torch
    from torch.utils import cpp_extension
except Exception as e:
    sys.exit("no PyTorch under %s: %s" % (sys.executable, e))
if not torch.cuda.is_available():
    sys.exit("PyTorch %s sees no CUDA device" % torch.__version__)
if cpp_extension.CUDA_HOME is None:
    sys.exit("PyTorch finds no CUDA toolkit (set CUDA_HOME) to build extensions")
PY
); then
  echo "SKIPPED: the torch-extension GPU test: ${why##*$'\n'}"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
examples=$src/examples
"$python" -c "import json,sys; c=json.load(open(sys.argv[1])); c['bf16']={'enabled':True}; json.dump(c,open(sys.argv[2],'w'))" \
  "$examples/ds_config.json" "$work/bf16.config.json"
for variant in f32:"$examples/ds_config.json" bf16:"$work/bf16.config.json"; do
  name=${variant%%:*}
  "$bin/dsc-run" compile --model "$examples/gpt2-tiny.json" --config "${variant#*:}" \
    -o "$work/$name.mlir"
  "$bin/dsc-translate" --emit-torch-extension "$work/$name.mlir" -o "$work/$name" > /dev/null
done
"$python" "$src/test/gpu/torch_ext_gpu.py" "$work/f32" "$work/bf16" "$work/build"
