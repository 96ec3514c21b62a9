#!/usr/bin/env bash
# Registers, spills and shared memory of every CUDA kernel in a jitk cache, one line each:
#   bash bench/gpu/regs.sh [CACHE_DIR] [JITK]
# Register pressure decides the memory-bound row kernels on Hopper (see bench/results), so this is
# the first thing to look at when one of them falls below the copy bandwidth.
set -euo pipefail
cache=${1:-${JITK_CACHE_DIR:-$HOME/.cache/jitk}}
jitk=${2:-./build-gpu/jitk}
cuobjdump=${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
JITK_CACHE_DIR=$cache "$jitk" ls --json |
  python3 -c 'import json, sys
for r in json.load(sys.stdin):
    if r["backend"] == "cuda":
        print(r["kernel"], r["params"], r["implementation"], r["launch"].replace(" ", "_"), r["key"])' |
  while read -r kernel params impl launch key; do
    blob=$cache/blobs/${key:0:2}/$key
    [ -f "$blob" ] || continue
    header=$(od -An -tu4 -j12 -N4 "$blob" | tr -d ' ')  # the blob's header_size (docs/cache-format.md), then the cubin
    tail -c +$((header + 1)) "$blob" > "$tmp/k.cubin"
    usage=$("$cuobjdump" --dump-resource-usage "$tmp/k.cubin" 2>/dev/null | grep -o "REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*" | head -1)
    printf "%-20s %-70s %-10s %-20s %s\n" "$kernel" "$params" "$impl" "$launch" "$usage"
  done
