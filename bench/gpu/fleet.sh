#!/usr/bin/env bash
# The fleet cold start (issue 28) on one GPU host: N processes, each with its own empty jitk cache and
# its own empty driver compute cache (CUDA_CACHE_PATH), start the Llama layer's first forward at the
# same moment (each compiles or fetches every variant from one thread each, then runs the forward);
# they share one redis-server of this script's own (unix socket, nothing persisted). Against one
# node's cold start: one such process alone, no remote, measured first in the same run.
#   bash bench/gpu/fleet.sh LAYER_BENCH [N]      (LAYER_BENCH: build-gpu/bench/gpu/jitk_layer_bench)
# Children spread over the visible GPUs (CUDA_VISIBLE_DEVICES = i mod GPUs); every child is set up
# (weights uploaded) before the start file appears, so the figure is the kernels' cold start, not
# the host's weight generation. Prints each side's compile_all_ms (from the start to every kernel
# loaded), the fleet's slowest and median child, the ratio, the fleet's compiles per kernel (from
# Redis: must be exactly one each) and whether every child's output equals one node's bit for bit.
# Needs redis-server and redis-cli on PATH (the GPU machine: fetch-gpu-deps.sh redis-server ...).
set -uo pipefail
bench=${1:?the jitk_layer_bench binary}
n=${2:-64}
command -v redis-server > /dev/null && command -v redis-cli > /dev/null ||
  { echo "fleet.sh: SKIPPED: redis-server / redis-cli not found"; exit 0; }
gpus=$(nvidia-smi -L 2> /dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "fleet.sh: SKIPPED: no GPU"; exit 0; }
work=$(mktemp -d /tmp/jitk-fleet-XXXXXX)
redis_pid=
cleanup() { [ -n "$redis_pid" ] && { kill -9 "$redis_pid"; wait "$redis_pid"; } 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT

# child INDEX START_FILE [ENV...]: one process with empty caches, output in $work/out-INDEX
child() {
  local i=$1 start=$2 gpu=0
  shift 2
  [[ $i =~ ^[0-9]+$ ]] && gpu=$((i % gpus))
  mkdir -p "$work/c$i/jitk" "$work/c$i/cuda"
  env JITK_CACHE_DIR="$work/c$i/jitk" CUDA_CACHE_PATH="$work/c$i/cuda" CUDA_VISIBLE_DEVICES=$gpu "$@" \
    timeout 600 "$bench" --child-first-forward --compile-all --ready-file "$work/ready-$i" --start-file "$start" > "$work/out-$i" 2>&1
}
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' "$2" | head -1; }

# One node: alone, no remote; its start file exists from the beginning.
touch "$work/go-alone"
child alone "$work/go-alone"
one=$(field compile_all_ms "$work/out-alone")
ref=$(field checksum "$work/out-alone")
[ -n "$one" ] && [ -n "$ref" ] || { echo "fleet.sh: the lone child failed:"; cat "$work/out-alone"; exit 1; }

sock=$work/redis.sock
redis-server --port 0 --unixsocket "$sock" --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 200); do redis-cli -s "$sock" ping > /dev/null 2>&1 && break; sleep 0.05; done
redis-cli -s "$sock" ping > /dev/null || { echo "fleet.sh: redis-server did not start"; cat "$work/redis.log"; exit 1; }

pids=()
for i in $(seq 0 $((n - 1))); do
  child "$i" "$work/go" JITK_REMOTE="unix://$sock" &
  pids+=($!)
done
# Every child set up (or gone), bounded: 300 s.
for _ in $(seq 3000); do
  ready=$(ls "$work" | grep -c '^ready-[0-9]')
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=$((alive + 1)); done
  [ "$ready" -ge "$n" ] || [ "$alive" -eq 0 ] && break
  sleep 0.1
done
touch "$work/go"
for p in "${pids[@]}"; do wait "$p"; done

times=() bad=0 failed=0
for i in $(seq 0 $((n - 1))); do
  t=$(field compile_all_ms "$work/out-$i")
  c=$(field checksum "$work/out-$i")
  if [ -z "$t" ]; then failed=$((failed + 1)); [ $failed -le 2 ] && { echo "child $i failed:"; tail -5 "$work/out-$i"; }; continue; fi
  times+=("$t")
  [ "$c" = "$ref" ] || bad=$((bad + 1))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -g)
slowest=$(echo "$sorted" | tail -1)
median=$(echo "$sorted" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
compiles=$(redis-cli -s "$sock" hgetall jitk:v1:compiles | awk 'NR % 2 == 0')
kernels=$(echo "$compiles" | grep -c .)
over=$(echo "$compiles" | awk '$1 != 1' | grep -c .)
echo "fleet: $n processes on $gpus GPU(s), $(nproc) cores; one node (alone, no remote) compile_all_ms $one"
echo "fleet: slowest child compile_all_ms $slowest, median $median; ratio slowest / one node $(awk -v a="$slowest" -v b="$one" 'BEGIN {printf "%.2f", a / b}')x"
echo "fleet: kernels compiled in the fleet $kernels (compiled more than once: $over); children failed $failed; outputs unlike one node's $bad"
echo "fleet: redis stats: $(redis-cli -s "$sock" hgetall jitk:v1:stats | paste -sd' ')"
printf '{"bench": "fleet_cold_start_%d_processes", "value": %s, "unit": "ms", "baseline": %s, "baseline_name": "one node alone", "ratio": %s, "kernels": %s, "over_once": %s, "failed": %s, "unlike": %s}\n' \
  "$n" "$slowest" "$one" "$(awk -v a="$slowest" -v b="$one" 'BEGIN {printf "%.3f", a / b}')" "$kernels" "$over" "$failed" "$bad"
[ "$failed" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$over" -eq 0 ] && [ "$kernels" -gt 0 ]
