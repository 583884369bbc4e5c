#!/usr/bin/env bash
# GPU test gpu-backend (ctest label gpu, GpuTests.cmake): the CUDA backend
# against the CPU backend.
# Exits 77 (ctest: skipped) with the reason when no GPU can be used.
#
#   kernels   every buffer of one micro-step and one update, each instruction
#             against its CPU counterpart (dsc-run check-cuda; tolerances
#             there: fp32 1e-3, bf16/fp16 3e-2 of the buffer's largest value;
#             integer buffers such as MLM masks exactly)
#   compression  the compressed optimizers' kernels against the CPU
#             (dsc-run check-cuda --compression)
#   training  20 steps of a GPT-2-shaped model (2 layers, d=256, seq 128,
#             dropout 0.1) in fp32 and bf16: losses within 1e-3 (fp32) and
#             2e-2 (bf16) of the CPU's, relative; BERT and fp16+LAMB for 5
#   graphs    a CUDA graph replay and kernel-by-kernel launches give
#             bit-identical losses, and so do two runs (deterministic)
#   cache     the second run loads the kernels from the on-disk cache
set -euo pipefail
bin=$1
src=$2
run=$bin/dsc-run
inputs=$src/test/gpu/Inputs

devices=$("$run" devices)
if grep -q "unavailable" <<<"$devices"; then
  echo "SKIPPED: the GPU tests need a GPU: $devices"
  exit 77
fi
echo "$devices"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DSC_KERNEL_CACHE=$work/cache
# Counting text: enough tokens for 20 steps of 8 x 128 without wrapping.
for i in $(seq 1 6000); do echo "$i $((i + 1)) $((i + 2)) $((i + 3))"; done > "$work/data.txt"

# Every check runs even after one fails: a GPU's minutes are rare, and the
# second failure is as informative as the first.
failures=()
check() { # model config steps
  echo "== check-cuda $1 $2 ($3 steps)"
  "$run" check-cuda --model "$inputs/$1.json" --config "$inputs/$2.json" \
    --data "$work/data.txt" --steps "$3" || failures+=("check-cuda $1 $2")
}
check gpt2-shaped ds-fp32 20
check gpt2-shaped ds-bf16 20
check gpt2-shaped ds-fp16 5
check bert-shaped ds-fp32 5
check bert-shaped ds-bf16 5
echo "== check-cuda --compression"
"$run" check-cuda --compression || failures+=("check-cuda --compression")

train() { # log-file [env...]
  local log=$1
  shift
  env "$@" "$run" train --backend cuda --model "$inputs/gpt2-shaped.json" \
    --config "$inputs/ds-bf16.json" --data "$work/data.txt" --steps 5 \
    --log-json "$log" > "$work/train.out" 2> "$work/train.err" ||
    { echo "FAIL: dsc-run train --backend cuda ($*)"; cat "$work/train.err"; exit 1; }
}
losses() { sed -E 's/.*"loss": ([^,]*),.*/\1/' "$1"; }

echo "== graphs vs kernel-by-kernel, run to run"
rm -rf "$DSC_KERNEL_CACHE"
train "$work/a.jsonl" DSC_CUDA_VERBOSE=1
grep -q "kernels compiled" "$work/train.err" ||
  { echo "FAIL: the first run did not compile the kernels"; cat "$work/train.err"; exit 1; }
train "$work/b.jsonl" DSC_CUDA_VERBOSE=1
grep -q "kernels loaded from" "$work/train.err" ||
  { echo "FAIL: the second run did not hit the kernel cache"; cat "$work/train.err"; exit 1; }
train "$work/c.jsonl" DSC_CUDA_GRAPHS=0
if ! diff <(losses "$work/a.jsonl") <(losses "$work/b.jsonl") ||
   ! diff <(losses "$work/a.jsonl") <(losses "$work/c.jsonl"); then
  echo "FAIL: losses are not bit-identical across runs or launch modes"
  exit 1
fi
echo "PASS: identical losses (graph, graph again, kernel by kernel); cache hit"
if ((${#failures[@]})); then
  printf 'FAIL: %s\n' "${failures[@]}"
  exit 1
fi
