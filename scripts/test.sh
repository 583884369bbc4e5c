#!/usr/bin/env bash
# Runs every test: GoogleTest unit tests, the lit suite (dialect, passes,
# importer, bad input, PyTorch reference checks, NVRTC compiles) and, where a
# GPU can be used, the GPU tests (ctest label gpu; skipped otherwise, with
# the reason printed here). Run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/../build"
echo "GPU tests: $(bin/dsc-run devices | head -1)"
ctest --output-on-failure -j"$(nproc)"
