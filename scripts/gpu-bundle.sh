#!/usr/bin/env bash
# Packs what the GPU suite needs into one folder (at most 60 MB) that runs on
# a GPU machine with the NVIDIA driver, CUDA 13's NVRTC and cuBLASLt, CMake
# and a Python with a CUDA PyTorch, but no LLVM/MLIR and no Debian packages:
#
#   scripts/gpu-bundle.sh [DIR]          (default DIR: gpu-bundle)
#   DIR/gpu-check.sh RESULTS_DIR         (there; see scripts/gpu-check.sh)
#   scripts/gpu-bundle.sh --from BUILD DIR
#       packs BUILD's binaries as they are (no static relink) to check the
#       packing and the bundled headers; such a folder runs only on a
#       machine with this one's shared libraries, not on a GPU machine
#       (ctest gpu-bundle uses it: the static relink takes minutes)
#
# Builds dsc-run, dsc-translate, DscNcclTests (NCCL on one GPU) and, where
# the cuDNN frontend was found, DscCudnnAttentionTests with
# DSC_STATIC_LINK in $DSC_STATIC_BUILD (default build-static/),
# strips them, and copies beside them the CUDA headers NVRTC needs
# (lib/Kernels/Common/cuda-headers.txt), the GPU tests (test/gpu) with their
# ctest project, the example models, bench/gpu_gpt2.py, bench/gpu_attention.py,
# bench/bench_moe.py
# and gpu-check.sh.
# Then checks the bundle: its binaries need no shared library outside the
# allowed set, they compile GPT-2 tiny's fp32 and bf16 kernels through NVRTC
# with the bundled headers only, and the folder is within the size limit.
# Run scripts/setup.sh first (it installs the packages this needs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
from=
if [ "${1:-}" = --from ]; then
  [ $# -eq 3 ] || { echo "usage: scripts/gpu-bundle.sh --from BUILD DIR" >&2; exit 2; }
  from=$2
  shift 2
fi
out=${1:-gpu-bundle}
static=${from:-${DSC_STATIC_BUILD:-build-static}}
limit_bytes=$((60 * 1000 * 1000))
# What a GPU node provides: glibc, the C runtime's own pieces, the driver's
# CUDA libraries.
allowed='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libgcc_s|libnvrtc|libcublasLt|libcublas)\.so'

fail() { echo "gpu-bundle: $*" >&2; exit 1; }

# DscCudnnAttentionTests (cuDNN's SDPA against a float64 attention, and
# replayed from a CUDA graph) exists where the build found the cuDNN
# frontend's headers; the bundle carries it then.
tools=(dsc-run dsc-translate DscNcclTests)
if [ -n "$from" ]; then
  for tool in "${tools[@]}"; do
    [ -x "$from/bin/$tool" ] || fail "$from/bin/$tool is not built (run scripts/setup.sh)"
  done
  [ -x "$from/bin/DscCudnnAttentionTests" ] && tools+=(DscCudnnAttentionTests)
else
  if [ ! -f "$static/build.ninja" ]; then
    cmake -G Ninja -S . -B "$static" -DCMAKE_BUILD_TYPE=Release \
      -DDSC_STATIC_LINK=ON \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
  fi
  ninja -C "$static" -t targets all | grep -q '^DscCudnnAttentionTests:' &&
    tools+=(DscCudnnAttentionTests)
  ninja -C "$static" "${tools[@]}"
  grep -q '^DSC_STATIC_LINK:BOOL=ON' "$static/CMakeCache.txt" ||
    fail "$static is not a DSC_STATIC_LINK build (remove it and run again)"
fi
if "$static/bin/dsc-run" devices | grep -q "built without"; then
  fail "$static has no CUDA backend (CMake found no CUDA toolkit)"
fi
# The toolkit's include directory, as CMake found it (lit's site config).
cuda_include=$(sed -n 's/^config.dsc_cuda_include = "\(.*\)"$/\1/p' "$static/test/lit.site.cfg.py")
[ -f "$cuda_include/cuda_bf16.h" ] ||
  fail "no CUDA headers in '$cuda_include' (the toolkit $static was configured with)"

case "$out" in
  /*) ;;
  *) out=$root/$out ;;
esac
rm -rf "$out"
mkdir -p "$out/bin" "$out/include/cuda" "$out/test" "$out/examples" "$out/bench"
for tool in "${tools[@]}"; do
  strip -o "$out/bin/$tool" "$static/bin/$tool"
done
(cd "$cuda_include" && cp --parents $(grep -v '^#' "$root/lib/Kernels/Common/cuda-headers.txt") \
  "$out/include/cuda/")
cp -r test/gpu "$out/test/"
rm -rf "$out/test/gpu/bundle" "$out/test/gpu/__pycache__"
cp test/gpu/bundle/CMakeLists.txt "$out/CMakeLists.txt"
cp examples/*.json "$out/examples/"
cp bench/gpu_gpt2.py bench/gpu_attention.py bench/bench_moe.py "$out/bench/"
cp scripts/gpu-check.sh "$out/gpu-check.sh"
# The distributed steps' launcher, torchrun-style (a GPU machine has no
# MPI).
mkdir -p "$out/test/distributed"
cp test/tools/Inputs/tcp/torchrun.py "$out/test/distributed/"

# The binaries need nothing a GPU node lacks (a --from build's do).
if [ -z "$from" ]; then
  for tool in "$out"/bin/*; do
    extra=$(ldd "$tool" | awk '{print $1}' | sed 's,.*/,,' | grep -Ev "$allowed" || true)
    [ -z "$extra" ] || fail "$(basename "$tool") needs $(echo $extra) (DSC_STATIC_LINK should link it in)"
  done
fi

# NVRTC compiles the kernels with the bundled headers alone (the bundled
# dsc-translate looks beside its bin/ first; the toolkit's directory is
# named nowhere).
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
sed 's/^{/{"bf16": {"enabled": true},/' examples/ds_config.json > "$check/bf16.json"
for config in examples/ds_config.json "$check/bf16.json"; do
  "$out/bin/dsc-run" compile --model examples/gpt2-tiny.json --config "$config" -o "$check/step.mlir"
  "$out/bin/dsc-translate" --emit-cuda "$check/step.mlir" -o "$check/k.cu" --nvrtc-check=sm_90 \
    > "$check/nvrtc.out" || fail "the bundled headers do not compile the kernels: $(cat "$check/nvrtc.out")"
  grep -q "headers from $out/include/cuda)" "$check/nvrtc.out" ||
    fail "NVRTC did not use the bundled headers: $(tail -1 "$check/nvrtc.out")"
done

{
  echo "dsc GPU bundle"
  [ -z "$from" ] || echo "packed from $from without the static link: NOT for a GPU machine"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "CUDA headers from: $cuda_include"
  echo "shared libraries needed:"
  ldd "$out/bin/dsc-run" | awk '{print "  " $1}'
} > "$out/MANIFEST.txt"

bytes=$(du -sb "$out" | cut -f1)
((bytes <= limit_bytes)) || fail "$out is $bytes bytes, over the $limit_bytes limit"
echo "gpu-bundle: $out ($((bytes / 1000000)) MB): run $(basename "$out")/gpu-check.sh RESULTS_DIR on the GPU machine"
