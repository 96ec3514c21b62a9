#!/usr/bin/env bash
# A candidate kept as a patch against the built-in kernel texts (bench/gpu/ab/NAME.patch) into a folder
# for JITK_KERNEL_DIR: each file the patch names, patched, at its path below kernel_sources/. The tree
# is left alone; fails if the patch does not apply to today's texts.
#   bash bench/gpu/ab/unpack.sh bench/gpu/ab/NAME.patch DIR     (from the repo root)
set -euo pipefail
patch_file=${1:?a patch, e.g. bench/gpu/ab/lpt2.patch}
dir=${2:?the folder to write, e.g. /tmp/ab/lpt2}
[ -f "$patch_file" ] || { echo "unpack.sh: no patch $patch_file" >&2; exit 1; }
files=$(sed -n 's|^+++ b/kernel_sources/\([^[:space:]]*\).*|\1|p' "$patch_file")
[ -n "$files" ] || { echo "unpack.sh: $patch_file names no file below kernel_sources/" >&2; exit 1; }
for f in $files; do
  mkdir -p "$dir/$(dirname "$f")"
  cp "kernel_sources/$f" "$dir/$f"
done
patch --quiet --forward --fuzz=0 -p2 -d "$dir" < "$patch_file" || { echo "unpack.sh: $patch_file does not apply to today's texts" >&2; exit 1; }
echo "$dir: $files"
