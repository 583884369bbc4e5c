#!/usr/bin/env bash
# The GPU suite in one command, run from the folder scripts/gpu-bundle.sh
# packs (this file is copied to its root):
#
#   BUNDLE/gpu-check.sh RESULTS_DIR [STEP...]
#   BUNDLE/gpu-check.sh RESULTS_DIR perf      (one ~9-minute command)
#   BUNDLE/gpu-check.sh RESULTS_DIR fusions   (a short second: the fused
#                                             paths against the CPU)
#   BUNDLE/gpu-check.sh RESULTS_DIR unrun     (what never ran)
#
# on a machine with an NVIDIA GPU and its driver, CUDA 13's NVRTC and
# cuBLASLt (the toolkit's, or pip's nvidia-cuda-nvrtc / nvidia-cublas), CMake,
# and a python3 with a CUDA PyTorch; no LLVM/MLIR needed. The steps, in
# order (name some to run only those):
#
#   libraries       where NVRTC is (LD_LIBRARY_PATH, the CUDA toolkit,
#                   Python's nvidia packages); ldd of dsc-run; cuBLASLt
#                   (libcublasLt.so.13, for DSC_CUBLASLT_LIBRARY) and NCCL
#                   (libnccl.so.2, for DSC_NCCL_LIBRARY)
#   devices         dsc-run devices (the GPUs, the libcublasLt and libcudnn
#                   found); nvidia-smi; fails where nvidia-smi lists a GPU
#                   that dsc-run cannot use (every GPU step would skip)
#   versions        driver, CUDA, cuDNN and torch versions
#   cpu-smoke       3 CPU training steps of GPT-2 tiny: the binaries run
#   nvrtc           GPT-2 tiny's bf16 kernels compile with this machine's
#                   NVRTC and the bundled headers (no GPU needed)
#   nccl            bin/DscNcclTests: NCCL loads, and a one-rank NCCL
#                   communicator runs every collective dsc issues on the GPU
#                   (a skipped test fails the step; one rank cannot tell a
#                   sum from a mean or a max: that takes 2 GPUs)
#   cudnn-sdpa      bin/DscCudnnAttentionTests' GPU test: cuDNN's fused
#                   attention forward and backward against a float64
#                   attention, and replayed from a CUDA graph
#   ctest-gpu       ctest -L gpu over the bundle (test/gpu/GpuTests.cmake):
#                   the CUDA backend against the CPU, the torch extension
#   check-cuda-*    dsc-run check-cuda, 2 steps, on each example model
#                   (the example configs without their warm-up, so the
#                   first update moves the weights)
#                   (GPT-2/BERT tiny fp32 and bf16, GPT-2 124M bf16 at seq 128),
#                   check-cuda --compression (the compressed optimizers'
#                   kernels against the CPU), and GPT-2 tiny with
#                   DeepSpeed's Fixed block-sparse layout (fp32, bf16);
#                   check-cuda-gemma2, -phi, -mixtral, -mixtral-drop (token
#                   dropping), -qwen2-moe: tiny models of those types;
#                   check-cuda-registers: the same for the register-resident
#                   attention forward (DSC_CUDA_ATTENTION=registers) on
#                   GPT-2 124M bf16 at seq 128 and GPT-2 tiny bf16;
#                   check-cuda-attention-{cudnn,registers,tiles}: each
#                   attention implementation forced, at dropout 0 (cuDNN's
#                   masks are its own), on GPT-2 tiny bf16 and GPT-2 124M
#                   bf16 at seq 128; check-cuda-epilogues (GELU) and
#                   check-cuda-bias-grad (BGRADA/BGRADB, DSC_CUDA_EPILOGUES)
#   sanitizer       compute-sanitizer --tool memcheck over one CUDA training
#                   step of GPT-2 tiny, kernel by kernel (skipped where the
#                   machine's runtime does not support it)
#   profile         DSC_PROFILE=1: GPU time per opcode of 3 training steps of
#                   GPT-2 124M, seq 1024, bf16, micro-batch 16
#   ncu-attention   Nsight Compute over the fused attention's kernels (one
#                   launch each, forward and backward, GPT-2 124M's shapes):
#                   speed of light, memory, occupancy, warp stalls, of the
#                   register-resident kernels (cuDNN's are not dsc's; skipped
#                   without ncu or hardware counters)
#   attention       bench/gpu_attention.py: dsc's fused attention forward and
#                   backward against PyTorch's SDPA, GPT-2 124M's shapes
#   attention-registers, attention-tiles, attention-cudnn  the same with
#                   DSC_CUDA_ATTENTION forced
#   sparse-attention  bench/gpu_attention.py at 4k, 8k and 16k tokens: dsc's
#                   Fixed block-sparse and dense kernels against SDPA
#   check-cuda-offload, -offload-params, -offload-nvme  ZeRO-Offload (stage
#                   2; stage 3 with offload_param; the state on NVMe) on GPT-2
#                   tiny: check-cuda, graph vs kernel-by-kernel weights
#                   (identical), CUDA vs CPU losses (1e-3)
#   bench-offload   GPT-2 124M bf16 ZeRO-2 tokens/s without offload, with
#                   CPU and NVMe offload (offload.json)
#   bench-moe       bench/bench_moe.py --backend cuda: a Mixtral (8 experts
#                   of 1024, top-2, width 512) against a dense LLaMA of the
#                   same active parameters, tokens/s on the GPU
#   bench-llama     bench/gpu_gpt2.py on examples/llama-3.2-1b.json, seq
#                   2048, bf16: dsc vs PyTorch eager and torch.compile
#   bench           bench/gpu_gpt2.py: GPT-2 124M, seq 1024, bf16, dsc vs
#                   PyTorch eager and torch.compile (gets the time left)
#   dist-*          5 training steps of GPT-2 tiny on 2 ranks sharing the GPU
#                   against the same job on 2 CPU ranks (both started
#                   torchrun's way: a GPU machine has no MPI), fp32: ZeRO 1, 2, 3,
#                   data parallel with accumulation, tensor slicing 2
#                   (vocabulary-parallel embedding and loss), pipeline 2
#                   (1F1B), 1-bit Adam, and a Mixtral (mixtral-tiny) with
#                   expert parallelism 2 (the rows' exchanges), dropless and
#                   with token dropping; losses and gradient norms
#                   within 1e-3 relative (the one-rank CUDA-vs-CPU training
#                   tolerance), the largest difference printed
#
# Five sets name the steps of one prepared command each (GPU time is rare).
# Steps run in the order above whatever the set; a selected step the time
# budget leaves no room for counts as failed (run it in a second command):
#   perf    libraries devices versions, cudnn-sdpa (cuDNN's SDPA against
#           float64, and from a CUDA graph), check-cuda-attention-* (cuDNN, the
#           register and the tiles kernels against the CPU),
#           attention-cudnn, attention-registers, bench (dsc's default
#           choice: cuDNN where loaded), profile
#   fusions libraries devices, check-cuda-epilogue-forms (check-cuda
#           --epilogues: every epilogue on synthetic fp32 operands, 1e-5;
#           tanh or erf GELU), check-cuda-gpt2-tiny (fp32: the tightest
#           whole-step gradient check), check-cuda-epilogues (cuBLASLt's
#           GELU epilogues against the CPU, DSC_CUDA_EPILOGUES=gelu),
#           check-cuda-bias-grad (its BGRADA/BGRADB bias gradients,
#           DSC_CUDA_EPILOGUES=bgrad), cudnn-dropout-curves (cuDNN's
#           attention with its own dropout masks against the register
#           kernels', loss curves)
#   unrun   libraries devices nccl check-cuda-sparse check-cuda-sparse-bf16
#           check-cuda-sparse-registers check-cuda-tiles-dropout
#           check-cuda-sparse-unfused check-cuda-registers check-cuda-gemma2 check-cuda-phi
#           check-cuda-mixtral check-cuda-mixtral-drop check-cuda-qwen2-moe
#           bench-moe bench-llama
#           sparse-attention ncu-attention ctest-gpu
#   distributed  libraries devices nccl dist-*
#   offload libraries devices check-cuda-offload* dist-zero2-offload
#           bench-offload
# Each step has a time cap, so the whole run ends within
# $DSC_GPU_CHECK_SECONDS (default 570); $DSC_GPU_BENCH_ARGS is added to the
# benchmark's arguments (e.g. "--max-batch 32 --steps 15"; later ones win).
# Writes to RESULTS_DIR:
#   gpu-check.log   every step's output, in order
#   results.json    {"bundle": ..., "steps": [{"name", "status" (pass, fail,
#                   skip, timeout), "seconds", "summary" (last line)}]}
#   bench.json      the benchmark's results (when it ran); bench-llama.json
#                   the LLaMA benchmark's
#   attention.json, attention-registers.json, sparse-attention.json  the
#                   attention benchmarks' (when they ran); offload.json
#                   bench-offload's
# The environment carries on: DSC_CUDA_ATTENTION=registers ./gpu-check.sh
# OUT bench runs the benchmark with the register-resident forward.
# Exits 0 when no step failed or timed out (skips are not failures).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 RESULTS_DIR [STEP...]" >&2; exit 2; }
results=$(mkdir -p "$1" && cd "$1" && pwd) || { echo "gpu-check: cannot create '$1'" >&2; exit 2; }
shift
selected=("$@")
if ((${#selected[@]} == 1)); then
  case ${selected[0]} in
    perf) selected=(libraries devices versions cudnn-sdpa 'check-cuda-attention-*'
                    attention-cudnn attention-registers bench profile) ;;
    fusions) selected=(libraries devices check-cuda-epilogue-forms check-cuda-gpt2-tiny
                       check-cuda-epilogues
                       check-cuda-bias-grad cudnn-dropout-curves) ;;
    unrun) selected=(libraries devices nccl check-cuda-sparse check-cuda-sparse-bf16
                     check-cuda-sparse-registers check-cuda-tiles-dropout
                     check-cuda-sparse-unfused check-cuda-registers check-cuda-gemma2 check-cuda-phi
                     check-cuda-mixtral check-cuda-mixtral-drop check-cuda-qwen2-moe
                     bench-moe bench-llama sparse-attention ncu-attention
                     ctest-gpu) ;;
    distributed) selected=(libraries devices nccl 'dist-*') ;;
    offload) selected=(libraries devices 'check-cuda-offload*' dist-zero2-offload
                       bench-offload) ;;
  esac
fi
[ -x "$here/bin/dsc-run" ] ||
  { echo "gpu-check: no bin/dsc-run beside $0: run it from the bundle scripts/gpu-bundle.sh makes" >&2; exit 2; }

budget=${DSC_GPU_CHECK_SECONDS:-570}
bin=$here/bin
examples=$here/examples
log=$results/gpu-check.log
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$log"
steps_json=()
failed=0

json_string() { # text: a JSON string literal
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=${s//$'\r'/}
  printf '"%s"' "$s"
}

wanted() { # step name: run it? (all when none were named)
  ((${#selected[@]} == 0)) && return 0
  local s
  for s in "${selected[@]}"; do
    [[ $1 == $s ]] && return 0
  done
  return 1
}

# step NAME CAP_SECONDS COMMAND...: runs COMMAND (a program, or a function
# of this script: they are exported) under `timeout`, which kills its whole
# process group at the cap; the output goes to the log; exit 77 means
# skipped. The cap shrinks to the time left (keeping 10 s for the results).
step() {
  local name=$1 cap=$2
  shift 2
  wanted "$name" || return 0
  local left=$((budget - SECONDS - 10))
  ((cap > left)) && cap=$left
  local status rc start=$SECONDS out=$work/step.out
  if ((cap < 20)); then
    # A selected step the budget left no time for is a failure: the run
    # did not deliver it (run the rest as a second command).
    status=timeout
    echo "not run: the time budget (${budget} s) is spent" > "$out"
  else
    timeout --kill-after=10 "$cap" bash -c '"$@"' _ "$@" > "$out" 2>&1
    rc=$?
    case $rc in
      0) status=pass ;;
      77) status=skip ;;
      124 | 137) status=timeout; echo "timed out after ${cap} s" >> "$out" ;;
      *) status=fail; echo "exit status $rc" >> "$out" ;;
    esac
  fi
  local seconds=$((SECONDS - start))
  local summary
  summary=$(grep -v '^[[:space:]]*$' "$out" | tail -1)
  { echo "===== $name: $status (${seconds} s)"; cat "$out"; echo; } >> "$log"
  echo "gpu-check: $name: $status (${seconds} s): $summary"
  [[ $status == fail || $status == timeout ]] && failed=1
  steps_json+=("{\"name\": $(json_string "$name"), \"status\": \"$status\", \"seconds\": $seconds, \"summary\": $(json_string "$summary")}")
}

# --- the steps' work ------------------------------------------------------------
# NVRTC for dsc-run: the dynamic loader's, else the CUDA toolkit's, else
# that of Python's nvidia-* wheels (added to LD_LIBRARY_PATH); cuBLASLt and
# NCCL, which dsc-run loads at run time, likewise (DSC_*_LIBRARY).
# A library dsc-run dlopen's: $VAR when set, else SONAME through the loader,
# else the first in find_cuda_libraries' dirs (the toolkit's, Python's
# nvidia-* wheels'), exported as VAR. Prints where; fails when none is found.
locate_loaded_library() {
  local label=$1 var=$2 soname=$3 hit
  if [ -n "${!var:-}" ]; then
    echo "$label: ${!var} ($var)"
  elif ldconfig -p 2>/dev/null | grep -F "$soname " > /dev/null; then
    echo "$label: $soname through the loader"
  else
    hit=$(find "${dirs[@]}" -name "$soname" 2>/dev/null | head -1)
    [ -n "$hit" ] || return 1
    export "$var=$hit"
    echo "$label: $hit"
  fi
}

find_cuda_libraries() {
  local missing dirs=() d lib hit
  dirs=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
  if command -v python3 > /dev/null; then
    while read -r d; do
      [ -d "$d/nvidia" ] && dirs+=("$d/nvidia")
    done < <(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
  fi
  missing=$(ldd "$bin/dsc-run" | awk '/not found/ {print $1}')
  if [ -n "$missing" ]; then
    for lib in $missing; do
      hit=$(find "${dirs[@]}" -name "$lib" 2>/dev/null | head -1)
      [ -n "$hit" ] || continue
      d=$(dirname "$hit")
      [[ :${LD_LIBRARY_PATH:-}: == *:$d:* ]] ||
        export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    done
  fi
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  ldd "$bin/dsc-run"
  if ldd "$bin/dsc-run" | grep -q "not found"; then
    echo "missing: $(ldd "$bin/dsc-run" | awk '/not found/ {print $1}' | tr '\n' ' ')(searched ${dirs[*]})"
    return 1
  fi
  # cuBLASLt (every CUDA step) and NCCL (multi-rank CUDA jobs and the nccl
  # step) are dlopen'ed by dsc-run.
  locate_loaded_library cuBLASLt DSC_CUBLASLT_LIBRARY libcublasLt.so.13 || {
    echo "missing: libcublasLt.so.13, which the CUDA backend loads (searched ${dirs[*]})"
    return 1
  }
  locate_loaded_library NCCL DSC_NCCL_LIBRARY libnccl.so.2 ||
    echo "NCCL: no libnccl.so.2 (multi-rank CUDA jobs and the nccl step need one)"
  echo "dsc-run finds all its libraries"
}

devices() {
  "$bin/dsc-run" devices || return 1
  if command -v nvidia-smi > /dev/null; then nvidia-smi || true; fi
  if ((!gpu_ok)); then
    # A GPU the driver lists that dsc cannot use fails (every GPU step
    # would skip and the run would pass); no GPU at all is a skip.
    if command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
      echo "FAIL: nvidia-smi lists a GPU that dsc-run cannot use"
      return 1
    fi
    echo "skipped: no usable GPU"
    return 77
  fi
}

# cuDNN's SDPA graphs against a float64 attention, forward and backward,
# and replayed from a CUDA graph (DscCudnnAttentionTests' GPU test).
cudnn_sdpa() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  [ -x "$bin/DscCudnnAttentionTests" ] ||
    { echo "skipped: the bundle has no DscCudnnAttentionTests (built without the cuDNN frontend)"; return 77; }
  "$bin/DscCudnnAttentionTests" --gtest_color=no --gtest_filter='CudnnSdpaGpu.*' |
    tee "$work/cudnn-sdpa.out" || return 1
  if grep -q "^\[  SKIPPED \]" "$work/cudnn-sdpa.out"; then
    echo "FAIL: the cuDNN test skipped on a machine with a usable GPU"
    return 1
  fi
}

nccl() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  "$bin/DscNcclTests" --gtest_color=no | tee "$work/nccl.out" || return 1
  if grep -q "^\[  SKIPPED \]" "$work/nccl.out"; then
    echo "FAIL: NCCL tests skipped on a machine with a usable GPU"
    return 1
  fi
}

versions() {
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  fi
  "$bin/dsc-run" devices | sed -n 's/^cudnn: /dsc cudnn: /p'
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1
  grep -m1 "define CUDA_VERSION" "$here/include/cuda/cuda.h" 2>/dev/null
  true
}

ctest_gpu() {
  set -o pipefail # a step runs in a fresh bash: ctest's status through tee
  # The project builds nothing, but CMake wants a build program to configure.
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake "${generator[@]}" -S "$here" -B "$work/ctest" > /dev/null || return 1
  ctest --test-dir "$work/ctest" -L gpu --output-on-failure -V | tee "$work/ctest.out" ||
    return 1
  local tests skipped
  tests=$(ctest --test-dir "$work/ctest" -N -L gpu | sed -n 's/^Total Tests: //p')
  skipped=$(grep -c "\*\*\*Skipped" "$work/ctest.out" || true)
  if ((skipped == tests)); then echo "all $tests GPU tests skipped"; return 77; fi
  # The torch extension may skip where torch finds no CUDA toolkit; the
  # backend's own tests must run where dsc-run sees a GPU.
  if ((gpu_ok)) && grep -q "gpu-backend .*\*\*\*Skipped" "$work/ctest.out"; then
    echo "FAIL: gpu-backend skipped on a machine with a usable GPU"
    return 1
  fi
  echo "ctest -L gpu: $tests tests, $skipped skipped, none failed"
}

nvrtc() {
  "$bin/dsc-run" compile --model "$examples/gpt2-tiny.json" --config "$work/bf16.json" \
    -o "$work/step.mlir" &&
    "$bin/dsc-translate" --emit-cuda "$work/step.mlir" -o "$work/k.cu" --nvrtc-check=sm_80,sm_90
}

# Every cuBLASLt epilogue dsc fuses on synthetic fp32 operands whose
# pre-activations span [-4, 4], within 1e-5 of the CPU: GELU's erf form
# would be 1e-4 off, so this says whether cuBLASLt's GELU is GPT-2's tanh.
check_cuda_epilogue_forms() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  "$bin/dsc-run" check-cuda --epilogues
}

check_cuda_compression() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  "$bin/dsc-run" check-cuda --compression
}

check_cuda() { # model (examples/ or the work folder) config [options...]
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  local model=$examples/$1.json
  [ -f "$model" ] || model=$work/$1.json
  "$bin/dsc-run" check-cuda --model "$model" --config "$2" \
    --data "$work/data.txt" --steps 2 "${@:3}"
}

# under_tool NAME UNSUPPORTED COMMAND...: runs COMMAND (a profiler or checker
# wrapping dsc-run) with its output in the log; exit 77 (skipped) when the
# output matches the grep pattern UNSUPPORTED (the machine's runtime does not
# let the tool attach), else COMMAND's status.
under_tool() {
  local name=$1 unsupported=$2 rc
  shift 2
  "$@" > "$work/$name.out" 2>&1
  rc=$?
  cat "$work/$name.out"
  if grep -q "$unsupported" "$work/$name.out"; then
    echo "skipped: $name cannot attach on this machine"
    return 77
  fi
  return $rc
}

# gpt2_small_run BATCH TOKENS: a bf16 config of that micro-batch and a data
# file of TOKENS token ids below GPT-2's vocabulary, for GPT-2 124M runs at
# seq 1024 ($work/gpt2-small-BATCH.json, $work/tokens-TOKENS.txt).
gpt2_small_run() {
  sed "s/\"train_micro_batch_size_per_gpu\": 8/\"train_micro_batch_size_per_gpu\": $1/" \
    "$work/bf16.json" > "$work/gpt2-small-$1.json"
  awk -v n="$2" 'BEGIN {for (i = 0; i < n; i++) print (i * 7) % 50000}' \
    > "$work/tokens-$2.txt"
}

sanitizer() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  command -v compute-sanitizer > /dev/null ||
    { echo "skipped: no compute-sanitizer on the PATH"; return 77; }
  DSC_CUDA_GRAPHS=0 under_tool compute-sanitizer \
    "Device not supported\|Failed to initialize" \
    compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$bin/dsc-run" train --backend cuda --model "$examples/gpt2-tiny.json" \
    --config "$examples/ds_config.json" --data "$work/data.txt" --steps 1
}

profile() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  gpt2_small_run 16 60000 # 3 steps of 16 x 1024 tokens
  DSC_PROFILE=1 "$bin/dsc-run" train --backend cuda \
    --model "$examples/gpt2-small.json" --config "$work/gpt2-small-16.json" \
    --seq-len 1024 --data "$work/tokens-60000.txt" --steps 3
}

attention() { # [json name]
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  python3 "$here/bench/gpu_attention.py" --dsc-run "$bin/dsc-run" \
    --model "$examples/gpt2-small.json" --json "$results/${1:-attention}.json"
}

# The register-resident attention forward (not yet run on a GPU before
# this step first did) against the CPU, then its speed.
# cuDNN's dropout masks are its own, so check-cuda (CPU masks) never runs
# cuDNN with dropout, what bf16 training runs: the loss curves of GPT-2
# 124M (dropout 0.1) at seq 128 with cuDNN and with the register kernels
# (dsc's masks, which check-cuda-registers holds to the CPU) must agree:
# the first loss within 2% (the same weights, other masks), the mean of
# the last 10 of 30 within 5%.
cudnn_dropout_curves() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  local impl
  for impl in cudnn registers; do
    DSC_CUDA_ATTENTION=$impl "$bin/dsc-run" train --backend cuda \
      --model "$examples/gpt2-small.json" --config "$work/bf16.json" --seq-len 128 \
      --data "$work/data.txt" --steps 30 --log-json "$work/curves-$impl.jsonl" \
      > "$work/curves-$impl.out" 2>&1 ||
      { cat "$work/curves-$impl.out"; echo "FAIL: $impl"; return 1; }
  done
  python3 - "$work/curves-cudnn.jsonl" "$work/curves-registers.jsonl" <<'PY'
import json, math, sys
def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]
cudnn, registers = losses(sys.argv[1]), losses(sys.argv[2])
print("cudnn    ", " ".join("%.3f" % x for x in cudnn))
print("registers", " ".join("%.3f" % x for x in registers))
assert len(cudnn) == len(registers) == 30, (len(cudnn), len(registers))
assert all(math.isfinite(x) for x in cudnn + registers), "a loss is not finite"
first = abs(cudnn[0] - registers[0]) / registers[0]
tail = sum(cudnn[-10:]) / 10, sum(registers[-10:]) / 10
last = abs(tail[0] - tail[1]) / tail[1]
print(f"first loss {first:.3g} apart; mean of the last 10 {last:.3g} apart")
sys.exit(0 if first <= 0.02 and last <= 0.05 else 1)
PY
}

check_cuda_registers() {
  DSC_CUDA_ATTENTION=registers check_cuda gpt2-small "$work/bf16.json" --seq-len 128 &&
    DSC_CUDA_ATTENTION=registers check_cuda gpt2-tiny "$work/bf16.json"
}
attention_registers() {
  DSC_CUDA_ATTENTION=registers attention attention-registers
}
attention_forced() { # implementation
  DSC_CUDA_ATTENTION=$1 attention "attention-$1"
}

# check-cuda with every 16-bit attention on implementation $1, at dropout
# 0: GPT-2 tiny bf16, GPT-2 124M bf16 at seq 128.
check_cuda_epilogues() {
  DSC_CUDA_EPILOGUES=gelu check_cuda gpt2-tiny "$work/ds_config.json" &&
    DSC_CUDA_EPILOGUES=gelu check_cuda gpt2-tiny "$work/bf16.json" &&
    DSC_CUDA_EPILOGUES=gelu check_cuda gpt2-small-nodrop "$work/bf16.json" --seq-len 128
}

# check-cuda with bias gradients from the weight-gradient GEMMs: GPT-2
# with its attention unfused, fp32 (BGRADA: a [K, N] weight; the fused
# attention's QKV gradient has no separate bias sum), BERT (BGRADB:
# [N, K]), then both epilogue kinds at once, fp32 and bf16.
check_cuda_bias_grad() {
  DSC_CUDA_EPILOGUES=bgrad check_cuda gpt2-tiny "$work/attention-unfused.json" &&
    DSC_CUDA_EPILOGUES=bgrad check_cuda bert-tiny "$work/ds_config_bert.json" &&
    DSC_CUDA_EPILOGUES=1 check_cuda gpt2-tiny "$work/attention-unfused.json" &&
    DSC_CUDA_EPILOGUES=1 check_cuda gpt2-tiny "$work/attention-unfused-bf16.json"
}

check_cuda_attention() {
  DSC_CUDA_ATTENTION=$1 check_cuda gpt2-tiny "$work/bf16.json" &&
    DSC_CUDA_ATTENTION=$1 check_cuda gpt2-small-nodrop "$work/bf16.json" --seq-len 128
}

ncu_attention() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  local ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "skipped: no ncu"; return 77; }
  gpt2_small_run 4 20000
  # Kernel by kernel (no graph), so ncu sees each launch; the first launch
  # of each attention kernel (forward; row dots, dK/dV and dQ backward).
  DSC_CUDA_GRAPHS=0 DSC_CUDA_ATTENTION=registers under_tool ncu \
    "ERR_NVGPUCTRPERM\|LibraryNotLoaded\|Failed to initialize the profiler" \
    "$ncu" --clock-control none --target-processes all \
    --kernel-id ::regex:dsc_Attention:1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats \
    "$bin/dsc-run" train --backend cuda --model "$examples/gpt2-small.json" \
    --config "$work/gpt2-small-4.json" --seq-len 1024 \
    --data "$work/tokens-20000.txt" --steps 1 || return 1
  if grep -q "No kernels were profiled" "$work/ncu.out"; then
    echo "FAIL: ncu profiled no dsc_Attention kernel"
    return 1
  fi
}

sparse_attention() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  python3 "$here/bench/gpu_attention.py" --dsc-run "$bin/dsc-run" \
    --model "$examples/gpt2-small.json" --batch 1 --layers 1 \
    --seq-lens 4096,8192,16384 --layouts dense,fixed \
    --json "$results/sparse-attention.json"
}

bench_moe() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  python3 "$here/bench/bench_moe.py" --backend cuda --dsc-run "$bin/dsc-run" \
    --width 512 --ffn 1024 --seq 256 --micro-batch 8 --steps 12
}

bench_llama() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  python3 "$here/bench/gpu_gpt2.py" --dsc-run "$bin/dsc-run" \
    --model "$examples/llama-3.2-1b.json" --seq-len 2048 --steps 12 --warmup 4 \
    --max-batch 16 --json "$results/bench-llama.json"
}

bench() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  python3 "$here/bench/gpu_gpt2.py" --dsc-run "$bin/dsc-run" \
    --model "$examples/gpt2-small.json" --steps 20 --warmup 5 \
    --json "$results/bench.json" ${DSC_GPU_BENCH_ARGS:-}
}

# compare_with_cpu CPU.jsonl CUDA.jsonl: the 5 steps' losses and gradient
# norms of a CUDA run within 1e-3 relative of the CPU run's (clipped
# AdamW's losses barely see a gradient off by a constant factor, a sum
# where a mean was due; the norms do).
compare_with_cpu() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def series(path, key):
    return [r[key] for r in map(json.loads, open(path)) if "loss" in r]
worst, complete = 0, True
for key in ("loss", "grad_norm"):
    cpu, cuda = series(sys.argv[1], key), series(sys.argv[2], key)
    complete = complete and len(cpu) == len(cuda) == 5
    print(f"{key} cpu ", cpu)
    print(f"{key} cuda", cuda)
    worst = max([worst] + [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(cpu, cuda)])
print(f"largest relative difference {worst:.3g}")
sys.exit(0 if complete and worst <= 1e-3 else 1)
PY
}

# dist_train NAME CONFIG_JSON_EDIT [ENV...]: 5 steps of GPT-2 tiny on 2 CPU
# ranks and on 2 CUDA ranks sharing the GPU, the config being
# examples/ds_config.json without its scheduler and with the python dict
# edit CONFIG_JSON_EDIT (of c).
dist_train() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  local name=$1 edit=$2 backend model=${DSC_DIST_MODEL:-gpt2-tiny}
  shift 2
  # No warm-up: the weights move from the first step.
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c.pop('scheduler'); $edit; json.dump(c, open(sys.argv[2], 'w'))" \
    "$examples/ds_config.json" "$work/$name.json" || return 1
  for backend in cpu cuda; do
    env "$@" python3 "$here/test/distributed/torchrun.py" --nproc 2 --timeout 200 -- \
      "$bin/dsc-run" train --backend $backend --model "$examples/$model.json" \
      --config "$work/$name.json" --data "$work/data.txt" --steps 5 \
      --log-json "$work/$name-$backend.jsonl" > "$work/$name-$backend.out" 2>&1 ||
      { cat "$work/$name-$backend.out"; echo "FAIL: $backend ranks"; return 1; }
  done
  cat "$work/$name-cuda.out"
  compare_with_cpu "$work/$name-cpu.jsonl" "$work/$name-cuda.jsonl"
}

# offload_check NAME EDIT: ZeRO-Offload on the GPU, GPT-2 tiny fp32 with
# examples/ds_config.json (no warm-up) edited by the Python statement EDIT
# on its dict c. check-cuda compares every instruction (the host updates,
# copies and swaps too) with the CPU; 5 training steps as a CUDA graph (the
# lanes of StepLanes.h overlapping) and kernel by kernel in program order
# (DSC_CUDA_GRAPHS=0) must save identical weights, as must the same config
# without offload (else the GPU is not deterministic here and the first
# comparison says nothing; both are printed); the CUDA losses are within
# 1e-3 relative of the CPU's. GEMM algorithms untimed (the heuristic's
# first) so that both runs use the same.
offload_check() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  local name=$1 edit=$2 mode plain result=0
  mkdir -p "$work/nvme-$name"
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c.pop('scheduler'); nvme=sys.argv[3]; $edit; json.dump(c, open(sys.argv[2], 'w'))" \
    "$examples/ds_config.json" "$work/$name.json" "$work/nvme-$name" || return 1
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); z=c['zero_optimization']; z.pop('offload_optimizer'); z.pop('offload_param', None); json.dump(c, open(sys.argv[2], 'w'))" \
    "$work/$name.json" "$work/$name-plain.json" || return 1
  check_cuda gpt2-tiny "$work/$name.json" || return 1
  for plain in "" -plain; do
    for mode in graph eager; do
      env DSC_CUDA_GEMM_TIMING=0 $([ $mode = eager ] && echo DSC_CUDA_GRAPHS=0) \
        "$bin/dsc-run" train --backend cuda --model "$examples/gpt2-tiny.json" \
        --config "$work/$name$plain.json" --data "$work/data.txt" --steps 5 \
        --log-json "$work/$name$plain-$mode.jsonl" \
        --save "$work/$name$plain-$mode.safetensors" > "$work/$name$plain-$mode.out" 2>&1 ||
        { cat "$work/$name$plain-$mode.out"; echo "FAIL: $name$plain ($mode)"; return 1; }
    done
    if cmp -s "$work/$name$plain-graph.safetensors" "$work/$name$plain-eager.safetensors"; then
      echo "${name}${plain:- (offloaded)}: graph and kernel-by-kernel weights identical"
    else
      echo "${name}${plain:- (offloaded)}: graph and kernel-by-kernel weights DIFFER"
      [ -z "$plain" ] && result=1
    fi
  done
  "$bin/dsc-run" train --backend cpu --model "$examples/gpt2-tiny.json" \
    --config "$work/$name.json" --data "$work/data.txt" --steps 5 \
    --log-json "$work/$name-cpu.jsonl" > "$work/$name-cpu.out" 2>&1 ||
    { cat "$work/$name-cpu.out"; echo "FAIL: cpu"; return 1; }
  compare_with_cpu "$work/$name-cpu.jsonl" "$work/$name-graph.jsonl" || result=1
  return $result
}

# bench_offload: GPT-2 124M, seq 1024, bf16, micro-batch 16, 4 micro-batches
# a step, ZeRO-2 on one GPU: tokens/s of steps 2-5 without offload, with
# the optimizer offloaded to the CPU and to NVMe (a folder of the work
# directory), and the offloaded step time over the plain one (the overlap
# target: <= 1.3x); results in offload.json.
bench_offload() {
  ((gpu_ok)) || { echo "skipped: no usable GPU"; return 77; }
  gpt2_small_run 16 400000 # 6 steps of 4 x 16 x 1024 tokens
  local variant
  mkdir -p "$work/bench-nvme"
  for variant in plain cpu nvme; do
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['gradient_accumulation_steps']=4; z={'stage': 2}; v=sys.argv[3]; z.update({} if v=='plain' else {'offload_optimizer': {'device': v, 'nvme_path': sys.argv[4], 'pin_memory': True}}); c['zero_optimization']=z; json.dump(c, open(sys.argv[2], 'w'))" \
      "$work/gpt2-small-16.json" "$work/offload-$variant.json" "$variant" "$work/bench-nvme" || return 1
    "$bin/dsc-run" train --backend cuda --model "$examples/gpt2-small.json" \
      --config "$work/offload-$variant.json" --seq-len 1024 \
      --data "$work/tokens-400000.txt" --steps 6 \
      --log-json "$work/offload-$variant.jsonl" > "$work/offload-$variant.out" 2>&1 ||
      { cat "$work/offload-$variant.out"; echo "FAIL: $variant"; return 1; }
  done
  python3 - "$work" "$results/offload.json" <<'PY'
import json, sys
work, out = sys.argv[1], sys.argv[2]
rate, losses = {}, {}
for v in ("plain", "cpu", "nvme"):
    rows = [json.loads(l) for l in open(f"{work}/offload-{v}.jsonl")]
    r = [x["tokens_per_s"] for x in rows if "tokens_per_s" in x][2:]
    rate[v] = sum(r) / len(r)
    losses[v] = [x["loss"] for x in rows if "loss" in x]
# The offloaded update is the same fp32 AdamW on the host: the losses must
# follow the device run's (a speed without the same training is no result).
worst = max(abs(a - b) / abs(a) for v in ("cpu", "nvme")
            for a, b in zip(losses["plain"], losses[v]))
res = {"model": "gpt2-small", "seq": 1024, "micro_batch": 16, "accumulation": 4,
       "tokens_per_s": rate,
       "step_time_ratio": {v: rate["plain"] / rate[v] for v in ("cpu", "nvme")},
       "losses": losses, "largest_loss_difference": worst}
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res))
complete = all(len(l) == 6 for l in losses.values())
sys.exit(0 if complete and worst <= 1e-3 else 1)
PY
}

# dist_train on examples/mixtral-tiny.json (4 experts, top-2).
dist_train_moe() { DSC_DIST_MODEL=mixtral-tiny dist_train "$@"; }

# --- the steps --------------------------------------------------------------------
# In this shell, not in a step, so that LD_LIBRARY_PATH carries on; the step
# reports what it found.
find_cuda_libraries > "$work/libraries.out" 2>&1
echo $? > "$work/libraries.rc"
gpu_ok=0
"$bin/dsc-run" devices 2>/dev/null | grep -q unavailable || gpu_ok=1
export bin examples work results here gpu_ok
export -f devices versions nvrtc nccl cudnn_sdpa ctest_gpu compare_with_cpu check_cuda check_cuda_epilogue_forms check_cuda_epilogues check_cuda_bias_grad cudnn_dropout_curves dist_train dist_train_moe bench_moe bench_llama \
  check_cuda_compression check_cuda_registers check_cuda_attention under_tool \
  gpt2_small_run sanitizer profile ncu_attention attention attention_registers \
  attention_forced sparse_attention bench offload_check bench_offload

step libraries 30 bash -c 'cat "$1"; exit "$(cat "$2")"' _ "$work/libraries.out" "$work/libraries.rc"
step devices 60 devices
step versions 30 versions

# Counting text as token ids below the tiny models' vocabulary of 256.
for i in $(seq 1 6000); do echo "$i $((i + 1)) $((i + 2)) $((i + 3))"; done |
  awk '{for (i = 1; i <= NF; i++) printf "%d ", $i % 250; print ""}' > "$work/data.txt"
step cpu-smoke 60 "$bin/dsc-run" train --backend cpu --model "$examples/gpt2-tiny.json" \
  --config "$examples/ds_config.json" --data "$work/data.txt" --steps 3

# No warm-up: WarmupLR from warmup_min_lr 0 leaves the weights where they
# are for the first steps, so a short check would compare the losses of
# the initial weights and never the update.
for config in ds_config ds_config_bert; do
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c.pop("scheduler", None); json.dump(c, open(sys.argv[2], "w"), indent=1)' \
    "$examples/$config.json" "$work/$config.json"
done
sed 's/^{/{"bf16": {"enabled": true},/' "$work/ds_config.json" > "$work/bf16.json"
# DeepSpeed's Fixed layout over GPT-2 tiny's 64 tokens: 4 blocks of 16.
sparse='"sparse_attention": {"mode": "fixed", "block": 16, "num_local_blocks": 2, "num_global_blocks": 1, "attention": "unidirectional"},'
sed "s/^{/{$sparse/" "$work/ds_config.json" > "$work/sparse.json"
sed "s/^{/{$sparse/" "$work/bf16.json" > "$work/sparse-bf16.json"
# The same layout unfused (dsc.fusion.attention off): the masked softmax rows.
unfuse_attention='import json, sys; c = json.load(open(sys.argv[1])); c.setdefault("dsc", {}).setdefault("fusion", {})["attention"] = False; json.dump(c, open(sys.argv[2], "w"))'
python3 -c "$unfuse_attention" "$work/sparse.json" "$work/sparse-unfused.json"
# GPT-2 tiny at 256 tokens, 64 wide heads, dropout: DeepSpeed's Fixed
# layout in 64-token blocks, which the register kernels run.
python3 - "$examples/gpt2-tiny.json" "$work/bf16.json" "$work" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m.update(n_positions=256, n_ctx=256, n_embd=256, n_head=4, attn_pdrop=0.1)
json.dump(m, open(sys.argv[3] + "/gpt2-tiny-256.json", "w"))
c = json.load(open(sys.argv[2]))
c["sparse_attention"] = {"mode": "fixed", "block": 64, "num_local_blocks": 2,
                         "num_global_blocks": 1, "attention": "unidirectional"}
c.setdefault("dsc", {})["seq_len"] = 256
json.dump(c, open(sys.argv[3] + "/sparse64-bf16.json", "w"))
PY
# GPT-2 with its attention unfused: where the bias-gradient epilogues form.
python3 -c "$unfuse_attention" "$work/ds_config.json" "$work/attention-unfused.json"
python3 -c "$unfuse_attention" "$work/bf16.json" "$work/attention-unfused-bf16.json"
step nvrtc 60 nvrtc

step nccl 60 nccl
step cudnn-sdpa 60 cudnn_sdpa

step check-cuda-gpt2-tiny 60 check_cuda gpt2-tiny "$work/ds_config.json"
step check-cuda-gpt2-tiny-bf16 60 check_cuda gpt2-tiny "$work/bf16.json"
step check-cuda-bert-tiny 60 check_cuda bert-tiny "$work/ds_config_bert.json"
step check-cuda-gpt2-small-bf16 120 check_cuda gpt2-small "$work/bf16.json" --seq-len 128
step check-cuda-compression 60 check_cuda_compression
step check-cuda-sparse 60 check_cuda gpt2-tiny "$work/sparse.json"
step check-cuda-sparse-bf16 60 check_cuda gpt2-tiny "$work/sparse-bf16.json"
step check-cuda-sparse-unfused 60 check_cuda gpt2-tiny "$work/sparse-unfused.json"
step check-cuda-registers 120 check_cuda_registers
# The register kernels over a block-sparse layout, and the tiles kernels
# with dropout (the attention-* checks run at dropout 0).
step check-cuda-sparse-registers 60 env DSC_CUDA_ATTENTION=registers \
  bash -c 'check_cuda gpt2-tiny-256 "$work/sparse64-bf16.json"'
step check-cuda-tiles-dropout 100 env DSC_CUDA_ATTENTION=tiles \
  bash -c 'check_cuda gpt2-small "$work/bf16.json" --seq-len 128'
# Gemma 2 (dsc.softcap on the scores and the logits) and Phi (partial rotary
# through split/concat, parallel blocks): tiny models written here.
python3 - "$work" "$examples/ds_config.json" <<'PY'
import json, sys
common = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "max_position_embeddings": 64}
json.dump({**common, "model_type": "gemma2", "head_dim": 16,
           "query_pre_attn_scalar": 24, "attn_logit_softcapping": 0.5,
           "final_logit_softcapping": 2.0, "sliding_window": 64},
          open(sys.argv[1] + "/gemma2-tiny.json", "w"))
json.dump({**common, "model_type": "phi", "partial_rotary_factor": 0.5},
          open(sys.argv[1] + "/phi-tiny.json", "w"))
json.dump({**common, "model_type": "qwen2_moe", "num_hidden_layers": 3,
           "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
           "num_experts": 4, "num_experts_per_tok": 2, "mlp_only_layers": [1],
           "output_router_logits": True, "router_aux_loss_coef": 0.02},
          open(sys.argv[1] + "/qwen2-moe-tiny.json", "w"))
ds = json.load(open(sys.argv[2]))
ds.pop("scheduler")
ds["moe"] = {"drop_tokens": True, "capacity_factor": 0.75, "min_capacity": 0}
json.dump(ds, open(sys.argv[1] + "/moe-drop.json", "w"))
PY
step check-cuda-gemma2 60 check_cuda gemma2-tiny "$work/ds_config.json"
step check-cuda-phi 60 check_cuda phi-tiny "$work/ds_config.json"
# The mixture-of-experts kernels: Mixtral dropless and with token dropping,
# Qwen2-MoE (unnormalised router, the shared expert's sigmoid gate).
step check-cuda-mixtral 60 check_cuda mixtral-tiny "$work/ds_config.json"
step check-cuda-mixtral-drop 60 check_cuda mixtral-tiny "$work/moe-drop.json"
step check-cuda-qwen2-moe 60 check_cuda qwen2-moe-tiny "$work/ds_config.json"
# GPT-2 124M without dropout: cuDNN's masks are its own.
sed 's/"\(attn\|embd\|resid\)_pdrop": [0-9.]*/"\1_pdrop": 0.0/' \
  "$examples/gpt2-small.json" > "$work/gpt2-small-nodrop.json"
for impl in cudnn registers tiles; do
  step "check-cuda-attention-$impl" 100 check_cuda_attention "$impl"
done
# cuBLASLt's GELU epilogues (opt-in): is its GELU GPT-2's tanh form?
step check-cuda-epilogue-forms 60 check_cuda_epilogue_forms
step check-cuda-epilogues 120 check_cuda_epilogues
step check-cuda-bias-grad 90 check_cuda_bias_grad
step cudnn-dropout-curves 120 cudnn_dropout_curves

step sanitizer 90 sanitizer
step profile 90 profile
step ncu-attention 120 ncu_attention
step attention 90 attention
step attention-registers 90 attention_registers
step attention-tiles 90 attention_forced tiles
step attention-cudnn 90 attention_forced cudnn
step sparse-attention 120 sparse_attention
step dist-zero1 90 dist_train zero1 "c['zero_optimization'] = {'stage': 1}"
step dist-zero2 90 dist_train zero2 "c['zero_optimization'] = {'stage': 2}"
step dist-zero3 90 dist_train zero3 "c['zero_optimization'] = {'stage': 3}"
step dist-data-parallel 90 dist_train data-parallel \
  "c['gradient_accumulation_steps'] = 2"
step dist-tensor-parallel 90 dist_train tensor-parallel \
  "c['tensor_parallel'] = {'autotp_size': 2}"
step dist-pipeline 90 dist_train pipeline \
  "c['pipeline'] = {'stages': 2}; c['gradient_accumulation_steps'] = 2"
step dist-qgz 90 dist_train qgz \
  "c['zero_optimization'] = {'stage': 3, 'zero_quantized_gradients': True}"
step dist-onebit-adam 90 dist_train onebit \
  "c['optimizer'] = {'type': 'OneBitAdam', 'params': {'lr': 1e-3, 'freeze_step': 2}}"
step dist-expert-parallel 90 dist_train_moe expert-parallel \
  "c['moe'] = {'ep_size': 2}"
step dist-expert-parallel-drop 90 dist_train_moe expert-parallel-drop \
  "c['moe'] = {'ep_size': 2, 'drop_tokens': True, 'capacity_factor': 0.75}"
step check-cuda-offload 90 offload_check offload \
  "c['zero_optimization'] = {'stage': 2, 'overlap_comm': True, 'offload_optimizer': {'device': 'cpu'}}"
step check-cuda-offload-params 90 offload_check offload-params \
  "c['zero_optimization'] = {'stage': 3, 'offload_optimizer': {'device': 'cpu'}, 'offload_param': {'device': 'cpu'}}"
step check-cuda-offload-nvme 90 offload_check offload-nvme \
  "c['zero_optimization'] = {'stage': 2, 'offload_optimizer': {'device': 'nvme', 'nvme_path': nvme}}"
step dist-zero2-offload 90 dist_train zero2-offload \
  "c['zero_optimization'] = {'stage': 2, 'offload_optimizer': {'device': 'cpu'}}"
step bench-offload 150 bench_offload
step bench-moe 90 bench_moe
step bench-llama 200 bench_llama
# Late: its tests (the GPU backend, the torch extension) passed before.
step ctest-gpu 330 ctest_gpu
step bench "$budget" bench

manifest=$(sed -n 's/^commit: //p' "$here/MANIFEST.txt" 2>/dev/null)
{
  echo "{\"bundle\": $(json_string "${manifest:-unknown}"), \"seconds\": $SECONDS, \"steps\": ["
  for ((i = 0; i < ${#steps_json[@]}; i++)); do
    sep=,
    ((i == ${#steps_json[@]} - 1)) && sep=
    echo "  ${steps_json[$i]}$sep"
  done
  echo "]}"
} > "$results/results.json"
echo "gpu-check: ${SECONDS} s; results in $results (results.json, gpu-check.log)"
exit $failed
