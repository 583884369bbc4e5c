#!/usr/bin/env bash
# The dialect's op reference and the pass reference, generated from the
# TableGen definitions by mlir-tblgen (add_mlir_doc; `ninja -C build
# mlir-doc`), are checked in as docs/reference/{ops,passes}.md.
#
#   scripts/reference-docs.sh check BUILD_DIR   fails, naming the stale file,
#                                               when they differ (ctest)
#   scripts/reference-docs.sh update [BUILD_DIR] regenerates and copies them
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
build=${2:-build}
pairs=("$build/docs/Dialects/DscOps.md docs/reference/ops.md"
       "$build/docs/DscPasses.md docs/reference/passes.md")
case $mode in
  update)
    ninja -C "$build" mlir-doc > /dev/null
    for pair in "${pairs[@]}"; do set -- $pair; cp "$1" "$2"; done
    echo "reference-docs: updated docs/reference/ops.md and passes.md" ;;
  check)
    for pair in "${pairs[@]}"; do
      set -- $pair
      [ -f "$1" ] || { echo "reference-docs: $1 is not generated (ninja -C $build mlir-doc)" >&2; exit 1; }
      cmp -s "$1" "$2" ||
        { echo "reference-docs: $2 is stale: the .td files changed; run scripts/reference-docs.sh update" >&2; exit 1; }
    done
    echo "reference-docs: docs/reference is current" ;;
  *) echo "usage: scripts/reference-docs.sh check BUILD_DIR | update [BUILD_DIR]" >&2; exit 2 ;;
esac
