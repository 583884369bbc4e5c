#!/usr/bin/env bash
# Installs what dsc needs on Debian 12 (only what is missing), then configures
# and builds it in ./build with Ninja and ccache. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  nlohmann-json3-dev libopenblas-dev libgtest-dev
  libopenmpi-dev openmpi-bin iproute2 liburing-dev
  python3-torch python3-numpy
)
. scripts/install-packages.sh
install_missing_packages setup "${packages[@]}"

# cuDNN attention (lib/CudaRuntime/CudnnAttention.cpp) is described with the
# header-only cuDNN frontend: its wheel's headers, unpacked once into the
# ignored third_party/ (any Python's wheel has the same headers). Without
# them everything else still builds.
cudnn_frontend_version=1.32.0
cudnn_frontend=third_party/cudnn-frontend
if [ "$(cat "$cudnn_frontend/VERSION" 2>/dev/null)" != "$cudnn_frontend_version" ] ||
  [ ! -f "$cudnn_frontend/include/cudnn_frontend.h" ]; then
  wheels=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$wheels" \
      "nvidia-cudnn-frontend==$cudnn_frontend_version" >/dev/null 2>&1 &&
    rm -rf "$cudnn_frontend" &&
    python3 - "$wheels"/nvidia_cudnn_frontend-*.whl "$cudnn_frontend" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extractall(sys.argv[2], [n for n in wheel.namelist()
                                   if n.startswith("include/")])
PY
  then
    echo "$cudnn_frontend_version" >"$cudnn_frontend/VERSION"
    echo "setup: cuDNN frontend $cudnn_frontend_version headers in $cudnn_frontend"
  else
    echo "setup: cannot fetch the cuDNN frontend headers with pip: cuDNN attention is not built"
  fi
  rm -rf "$wheels"
fi

if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
fi
ninja -C build -j"$(nproc)" all
