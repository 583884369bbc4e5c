#!/usr/bin/env bash
# Runs every test: GoogleTest unit tests and the lit suite (dialect, passes,
# importer, bad input, PyTorch reference checks). Run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/../build"
ctest --output-on-failure -j"$(nproc)"
