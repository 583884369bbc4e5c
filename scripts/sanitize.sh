#!/usr/bin/env bash
# The unit tests and tiny training runs under AddressSanitizer and
# UndefinedBehaviorSanitizer (GCC), in build-asan/. Any report fails the run
# (halt_on_error, no recovery from UB). Run scripts/setup.sh first.
#
#   scripts/sanitize.sh
#
# What runs: every GoogleTest unit test (ctest -L unit); dsc-run train on
# GPT-2 tiny (fp32, bf16, fp16 with loss scaling, a checkpoint and a resume,
# periodic checkpoints) and BERT tiny; dsc-run estimate; dsc-opt over the
# pass tests' inputs; dsc-translate --emit-cuda. MLIR's own (Debian)
# libraries are not instrumented; everything of dsc is.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${DSC_ASAN_BUILD:-build-asan}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1"
# --as-needed: CMake's CUDA::nvrtc drags in the driver stub (libcuda.so.1),
# which only a GPU machine has; the normal build drops it the same way.
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined -Wl,--as-needed" \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py > /dev/null
ninja -C "$build" ${DSC_ASAN_JOBS:+-j$DSC_ASAN_JOBS} \
  dsc-run dsc-opt dsc-translate DscRuntimeTests DscMemoryPlanTests \
  DscConfigTests DscRematTests DscKernelCacheTests
# A sanitizer report exits 99 (leaks 98), told apart from dsc's own exit 1.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons its slabs in the
# inline copies compiled into dsc (instrumented) but not in Debian's
# libMLIR.so (not instrumented), so MLIR writing into a slab our copy
# poisoned would be a false report.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:exitcode=99:allow_user_poisoning=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# LLVM's and MLIR's global registries outlive main by design.
export LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp:exitcode=98

echo "== unit tests"
(cd "$build" && ctest -L unit --output-on-failure -j"$(nproc)" | tail -3)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=$build/bin/dsc-run
ex=$root/examples
for i in $(seq 1 400); do echo "$i $((i + 1)) $((i + 2))"; done |
  awk '{for (i = 1; i <= NF; i++) printf "%d ", $i % 250; print ""}' > "$work/data.txt"
precision() { # name -> a ds_config with that precision section
  sed "s/^{/{\"$1\": {\"enabled\": true},/" "$ex/ds_config.json" > "$work/$1.json"
}
precision bf16
precision fp16

echo "== dsc-run train (GPT-2 tiny fp32, bf16, fp16; checkpoints; BERT tiny)"
"$run" train --model "$ex/gpt2-tiny.json" --config "$ex/ds_config.json" --data "$work/data.txt" \
  --steps 3 --checkpoint "$work/ck.safetensors" --checkpoint-every 2 --save "$work/w.safetensors" > /dev/null
"$run" train --model "$ex/gpt2-tiny.json" --config "$ex/ds_config.json" --data "$work/data.txt" \
  --steps 2 --resume "$work/ck.safetensors" --log-json "$work/log.jsonl" > /dev/null
"$run" train --model "$ex/gpt2-tiny.json" --config "$ex/ds_config.json" --data "$work/data.txt" \
  --steps 1 --init-from "$work/w.safetensors" > /dev/null
"$run" train --model "$ex/gpt2-tiny.json" --config "$work/bf16.json" --data "$work/data.txt" --steps 2 > /dev/null
"$run" train --model "$ex/gpt2-tiny.json" --config "$work/fp16.json" --data "$work/data.txt" --steps 2 > /dev/null
"$run" train --model "$ex/bert-tiny.json" --config "$ex/ds_config_bert.json" --data "$work/data.txt" --steps 2 > /dev/null
"$run" estimate --model "$ex/gpt2-small.json" --config "$ex/ds_config.json" > /dev/null
"$run" compile --model "$ex/gpt2-tiny.json" --config "$work/bf16.json" -o "$work/step.mlir"
"$build/bin/dsc-translate" --emit-cuda "$work/step.mlir" -o "$work/k.cu" > /dev/null

echo "== dsc-opt over the pass tests' inputs"
for f in "$root"/test/Transforms/*.mlir; do
  # Each file's first RUN line names its pipeline; run the pass it tests.
  pass=$(sed -n 's/^\/\/ RUN: dsc-opt %s \([^|]*\)|.*/\1/p' "$f" | head -1)
  [ -n "$pass" ] || continue
  # Expected errors (exit 1) are fine; a sanitizer report is not.
  rc=0
  eval "\"$build/bin/dsc-opt\" \"$f\" $pass" > /dev/null 2> "$work/opt.err" || rc=$?
  if ((rc >= 98)); then
    cat "$work/opt.err"
    echo "sanitize: dsc-opt $pass on $f: sanitizer report"
    exit 1
  fi
done
echo "sanitize: no ASan/UBSan/LSan report"
