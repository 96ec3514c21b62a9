#!/usr/bin/env bash
# Writes attention_prefill A/B variants of the built-in Hopper text under OUT, each a folder for
# JITK_KERNEL_DIR: the same text with other defaults of its switches, so one text is kept and the
# variants are made on the device:
#   bash bench/gpu/ab/fa3-variants.sh /tmp/fa3 [NAME ...] && bash bench/gpu/ab.sh prefill /tmp/fa3/plain ...
# NAMEs pick variants (default: all). A variant sets only the switches it names (the text's own
# default, which may depend on the head size, stands for the others):
#   JITK_FA_ASYNC_PRODUCER  the cp.async producer never waits for its copies (cp.async.mbarrier.arrive)
#   JITK_FA_RESCALE_EARLY   O's rows rescaled while Q K^T runs, before P V is issued
#   JITK_FA_STAGE_O         O staged through shared memory for 16-byte row stores
#   JITK_FA_PINGPONG        the consumers take turns issuing their products
#   TMA                     not a text switch: an ab.env of JITK_FA_TMA=1 (cuda-sm90a-tma ranked first)
# FA3_TEXT=FILE takes another text (default: kernel_sources/attention_prefill/attention_prefill.cu).
set -euo pipefail
out=${1:?an output folder}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
text=${FA3_TEXT:-$here/../../../kernel_sources/attention_prefill/attention_prefill.cu}
variants=(
  "plain JITK_FA_ASYNC_PRODUCER=0 JITK_FA_RESCALE_EARLY=0"  # the text of run 6 (2026-11-26)
  "async JITK_FA_ASYNC_PRODUCER=1"
  "no_async JITK_FA_ASYNC_PRODUCER=0"
  "rescale JITK_FA_RESCALE_EARLY=1"
  "no_rescale JITK_FA_RESCALE_EARLY=0"
  "overlap JITK_FA_PINGPONG=0"
  "stage_o JITK_FA_STAGE_O=1"
  "tma TMA"
  "tma_overlap TMA JITK_FA_PINGPONG=0"
  "tma_rescale TMA JITK_FA_RESCALE_EARLY=1"
)
for v in "${variants[@]}"; do
  read -ra parts <<< "$v"
  name=${parts[0]}
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  mkdir -p "$out/$name/attention_prefill"
  args=()
  rm -f "$out/$name/ab.env"
  for s in "${parts[@]:1}"; do
    if [ "$s" = TMA ]; then echo "JITK_FA_TMA=1" > "$out/$name/ab.env"; continue; fi
    args+=(-e "s/^#define ${s%%=*} .*/#define ${s%%=*} ${s#*=}/")
  done
  if [ ${#args[@]} -gt 0 ]; then sed "${args[@]}" "$text" > "$out/$name/attention_prefill/attention_prefill.cu"
  else cp "$text" "$out/$name/attention_prefill/attention_prefill.cu"; fi
done
ls "$out"
