#!/usr/bin/env bash
# ctest gpu-bundle (label bundle): scripts/gpu-bundle.sh packs the GPU bundle
# from BUILD_DIR's binaries as they are (--from: no static relink, which
# took minutes of every test run), and the bundle's gpu-check.sh runs its
# steps that need no GPU, which must pass: the binaries find their
# libraries, train on the CPU, and compile the kernels with NVRTC and the
# bundled headers only. `devices` passes with a GPU and skips without one.
# With DSC_TEST_STATIC_BUNDLE=1 it packs the real bundle instead, from a
# DSC_STATIC_LINK build in BUILD_DIR/static, and gpu-bundle.sh also checks
# that the binaries need no LLVM/MLIR/OpenBLAS/libgomp/libstdc++ (ldd).
#
#   bundle-test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
if [ "${DSC_TEST_STATIC_BUNDLE:-0}" = 1 ]; then
  DSC_STATIC_BUILD=$build/static "$src/scripts/gpu-bundle.sh" "$build/gpu-bundle"
else
  "$src/scripts/gpu-bundle.sh" --from "$build" "$build/gpu-bundle"
fi
rm -rf "$build/gpu-check"
"$build/gpu-bundle/gpu-check.sh" "$build/gpu-check" libraries devices cpu-smoke nvrtc
python3 - "$build/gpu-check/results.json" <<'PY'
import json, sys
steps = {s["name"]: s["status"] for s in json.load(open(sys.argv[1]))["steps"]}
want = {"libraries": "pass", "cpu-smoke": "pass", "nvrtc": "pass"}
assert all(steps.get(k) == v for k, v in want.items()) and \
    steps.get("devices") in ("pass", "skip"), "results.json: %s" % steps
print("PASS: the GPU bundle runs:", steps)
PY
