#!/usr/bin/env bash
# Installs what dsc needs on Debian 12 (only what is missing), then configures
# and builds it in ./build with Ninja and ccache. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  nlohmann-json3-dev libopenblas-dev libgtest-dev
  libopenmpi-dev openmpi-bin iproute2
  python3-torch python3-numpy
)
. scripts/install-packages.sh
install_missing_packages setup "${packages[@]}"

if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
fi
ninja -C build -j"$(nproc)" all
