#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (README "Fuzzing") in build-fuzz/
# with clang-19, ASan and UBSan, and runs each for SECONDS (default 60), one
# at a time on one core, starting from the seed corpus fuzz/corpus/<target>/
# and the regression inputs fuzz/regressions/<target>/:
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# TARGETs: safetensors tokens config checkpoint mlir (default: all). The
# corpus each run grows is kept in build-fuzz/corpus/<target>/, crashes,
# timeouts and out-of-memory inputs go to build-fuzz/findings/<target>/, the
# log to build-fuzz/logs/<target>.log. Installs clang-19 and
# libclang-rt-19-dev (libFuzzer, the sanitizer runtimes) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(safetensors tokens config checkpoint mlir)

packages=(clang-19 libclang-rt-19-dev)
. scripts/install-packages.sh
install_missing_packages fuzz "${packages[@]}"

if [ ! -f build-fuzz/build.ninja ]; then
  cmake -G Ninja -S . -B build-fuzz -DDSC_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 >/dev/null
fi
ninja -C build-fuzz -j1 $(printf 'dsc-fuzz-%s ' "${targets[@]}")

# Per target: the longest input worth trying (a safetensors header, a token
# file with its 1 KiB llm.c header, a config, a lowered GPT-2 step).
declare -A max_len=([safetensors]=4096 [tokens]=4096 [config]=4096
                    [checkpoint]=2048 [mlir]=65536)
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
  mkdir -p "$corpus" "$findings" build-fuzz/logs
  echo "fuzz: $t for ${seconds}s"
  # One job on one core; a finding stops the run (exit status non-zero).
  if ! build-fuzz/fuzz/dsc-fuzz-$t "$corpus" "$root/fuzz/corpus/$t" \
      "$root/fuzz/regressions/$t" -max_total_time="$seconds" \
      -max_len="${max_len[$t]}" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -timeout=10 -artifact_prefix="$findings/" -print_final_stats=1 \
      > "build-fuzz/logs/$t.log" 2>&1; then
    echo "fuzz: $t: FINDING, see build-fuzz/logs/$t.log and $findings/"
    status=1
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)' \
    "build-fuzz/logs/$t.log" | sed "s/^/fuzz: $t: /" || true
  echo "fuzz: $t: corpus $(ls "$corpus" | wc -l) inputs"
done
exit $status
