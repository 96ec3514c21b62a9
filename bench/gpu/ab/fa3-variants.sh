#!/usr/bin/env bash
# Writes the attention_prefill A/B variants of fa3-next (each a folder for JITK_KERNEL_DIR) under OUT:
# the same text with other defaults of its switches (JITK_FA_ASYNC_PRODUCER, JITK_FA_RESCALE_EARLY,
# JITK_FA_STAGE_O, JITK_FA_PINGPONG), so one text is kept and the variants are made on the device:
#   bash bench/gpu/ab/fa3-variants.sh /tmp/fa3 && bash bench/gpu/ab.sh prefill /tmp/fa3/async3 /tmp/fa3/stage_o ...
set -euo pipefail
out=${1:?an output folder}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
text=$here/fa3-next/attention_prefill/attention_prefill.cu
# name: async producer, rescale early, stage O, ping-pong
for v in "async3 1 0 0 1" "rescale3 0 1 0 1" "async3_rescale 1 1 0 1" "overlap3 0 0 0 0" "stage_o 0 0 1 1"; do
  read -r name async rescale stage pingpong <<< "$v"
  mkdir -p "$out/$name/attention_prefill"
  sed -e "s/^#define JITK_FA_ASYNC_PRODUCER .*/#define JITK_FA_ASYNC_PRODUCER $async/" \
      -e "s/^#define JITK_FA_RESCALE_EARLY .*/#define JITK_FA_RESCALE_EARLY $rescale/" \
      -e "s/^#define JITK_FA_STAGE_O .*/#define JITK_FA_STAGE_O $stage/" \
      -e "s/^#define JITK_FA_PINGPONG .*/#define JITK_FA_PINGPONG $pingpong/" "$text" > "$out/$name/attention_prefill/attention_prefill.cu"
done
ls "$out"
