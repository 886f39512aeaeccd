#!/usr/bin/env bash
# Ranks as processes against their bounds, measured side by side in one run (docs/PERFORMANCE.md,
# targets 8 and 9), alternating the variants in every round so that drift on a shared machine
# favours none of them:
#
#   latency  4 processes of one host (shared memory) against 4 threads: 1 KiB float32 AllReduce,
#            blocking (-z 1), the median of 2000 calls after 20000 warm-ups (fewer leave the first mode timed
#            while four JVMs still compile), out of place and in place.
#   hosts    two network namespaces joined by a veth pair (as root, with iproute2), 2 ranks in each:
#            the hierarchical AllReduce of 64 MiB float32 (shared memory within a namespace, TCP across)
#            against the veth's bound, which each run measures after its AllReduce (--bound), and
#            against the best bound of all the rounds: the link is the same in every round, and on
#            shared cores one run's bound can land far below what the link carried in another.
#
# Usage: ci/bench-processes.sh [latency|hosts|all] [ROUNDS]     (default: all 4)
# NCCL4J_CLI overrides how nccl4j is started (default: ./nccl4j from the checkout). Prints one line per
# variant and round, then per target the ratios and shares of every round; nothing is written elsewhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
rounds="${2:-4}"
read -r -a cli <<< "${NCCL4J_CLI:-$root/nccl4j}"
"${cli[@]}" --version >/dev/null # builds on first use, outside any timing

# The row of one size from a sweep's output, rank 0's: time out of place, in place, and (with --bound) the shares.
row() {
  sed -e 's/^\[rank 0\] //' | awk -F'|' -v size="$1" '$1 + 0 == size && NF >= 13 {
    gsub(/ /, ""); printf "%s %s %s %s\n", $6, $10, ($15 == "" ? "-" : $15), ($16 == "" ? "-" : $16) }'
}

latency() {
  local sweep=(sweep --backend cpu --op allreduce -b 1K -e 1K -z 1 -n 2000 -w 20000)
  local ratios=()
  for r in $(seq 1 "$rounds"); do
    local p t
    p=$("${cli[@]}" run --nproc-per-node 4 -- "${sweep[@]}" 2>&1 | row 1024)
    t=$("${cli[@]}" "${sweep[@]}" --world-size 4 2>&1 | row 1024)
    read -r po pi _ _ <<< "$p"
    read -r to ti _ _ <<< "$t"
    echo "latency round $r: 4 processes $po / $pi us, 4 threads $to / $ti us (out of place / in place)"
    ratios+=("$(awk -v a="$po" -v b="$to" -v c="$pi" -v d="$ti" 'BEGIN { printf "%.2f/%.2f", a / b, c / d }')")
  done
  echo "latency: processes / threads per round (out of place/in place): ${ratios[*]}"
}

hosts() {
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "hosts: skipped: network namespaces need root and iproute2 (ip)"
    return 0
  fi
  local id a b net
  id=$(printf '%04x' $((RANDOM % 65536)))
  a="n4jb${id}a"
  b="n4jb${id}b"
  net=$((RANDOM % 200 + 20))
  trap 'ip netns del '"$a"' 2>/dev/null; ip netns del '"$b"' 2>/dev/null' EXIT
  ip netns add "$a" && ip netns add "$b" \
    && ip link add "v${id}a" type veth peer name "v${id}b" \
    && ip link set "v${id}a" netns "$a" && ip link set "v${id}b" netns "$b" \
    && ip -n "$a" addr add "10.214.$net.1/24" dev "v${id}a" && ip -n "$b" addr add "10.214.$net.2/24" dev "v${id}b" \
    && ip -n "$a" link set "v${id}a" up && ip -n "$b" link set "v${id}b" up \
    && ip -n "$a" link set lo up && ip -n "$b" link set lo up \
    || { echo "hosts: skipped: cannot make network namespaces here"; return 0; }
  local shares=() bounds=() times=()
  export NCCL4J_JOB_TOKEN
  NCCL4J_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  for r in $(seq 1 "$rounds"); do
    local port=$((30000 + RANDOM % 5000)) out
    out=$(mktemp)
    local launch=(--nnodes 2 --nproc-per-node 2 --master-addr "10.214.$net.1" --master-port "$port" --
      sweep --backend cpu --op allreduce -b 64M -e 64M -n 40 -w 10 --bound)
    NCCL4J_JOB_ID="bench-$id-$r" ip netns exec "$b" "${cli[@]}" run --node-rank 1 "${launch[@]}" >/dev/null 2>&1 &
    local other=$!
    NCCL4J_JOB_ID="bench-$id-$r" ip netns exec "$a" "${cli[@]}" run --node-rank 0 "${launch[@]}" >"$out" 2>&1 || true
    wait "$other" || true
    local bound line
    bound=$(sed -n 's/^\[rank 0\] # bound: B = \([0-9.]* GB\/s\).*one way alone \([0-9.]* GB\/s\).*/\1 (one way \2)/p' "$out")
    line=$(row 67108864 < "$out")
    if [ -z "$line" ]; then
      echo "hosts round $r: no result; the run printed:"
      cat "$out"
      rm -f "$out"
      return 1
    fi
    rm -f "$out"
    read -r ho hi so si <<< "$line"
    echo "hosts round $r: veth B = $bound, hierarchical $ho / $hi us, $so / $si of the bound"
    shares+=("$so/$si")
    bounds+=("${bound%% GB/s*}")
    times+=("$ho/$hi")
  done
  echo "hosts: share of the veth bound per round (out of place/in place): ${shares[*]}"
  # The bound of 64 MiB across 2 hosts is S/B (2(H-1)/H = 1).
  printf '%s\n' "${bounds[@]}" "${times[@]}" | awk '
    !/\// { if ($1 > best) best = $1; next }
    { split($0, t, "/"); bound = 67108864 / (best * 1e9) * 1e6;
      out = out sprintf(" %.0f%%/%.0f%%", 100 * bound / t[1], 100 * bound / t[2]) }
    END { printf "hosts: share of the best bound of these rounds (B = %.2f GB/s, out of place/in place):%s\n", best, out }'
}

case "$what" in
  latency) latency ;;
  hosts) hosts ;;
  all) latency; hosts ;;
  *) echo "usage: ci/bench-processes.sh [latency|hosts|all] [ROUNDS]" >&2; exit 2 ;;
esac
