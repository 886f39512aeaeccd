#!/usr/bin/env bash
# nccl4j's CPU backend beside Open MPI (docs/PERFORMANCE.md, "Beside Open MPI"): the same timing patterns, the same
# data and the same checks on both sides — native/tools/bench/mpi_patterns.c under mpirun, and ./nccl4j patterns with
# 4 ranks as processes (./nccl4j run --nproc-per-node 4) and as threads — alternating in every round (odd rounds
# MPI, processes, threads; even rounds the reverse) so that drift on a shared machine favours none of them. Prints one
# table of the medians over the rounds (each run's median per pattern and size; for back-to-back and arrival-skew the
# run's time per call or step), the ratios nccl4j / MPI, the oversubscription line of every run, and the load average
# at the start and the end. Every run checks its own results; a wrong element, a failed run, or arrival-skew floors
# that differ between the C and the Java side (their delay sequences must be the same) fail the script.
#
# Usage: ci/bench-mpi.sh [--smoke | --hosts] [--rounds N] [-- ARGS...]
#   (default)  2 rounds, every size (1K, 64K, 1M, 16M, 64M), the default calls (about 4 minutes on 2 cores).
#   --smoke    1 KiB and 64 KiB, 20 calls, nccl4j as threads only (and MPI when it is installed), one round; then
#              proves that a wrong element fails each side (--inject-wrong must exit 1). For CI: seconds.
#   --hosts    over TCP between two hosts instead: two network namespaces joined by a veth pair (as root, with
#              iproute2), 2 ranks in each. MPI: mpirun in the first namespace, its daemon started in the second by an
#              rsh agent that runs `ip netns exec` instead of ssh, with the TCP BTL alone (--mca btl tcp,self, so TCP
#              within a namespace too); nccl4j: ./nccl4j run --nnodes 2 in each (shared memory within a namespace,
#              TCP across: the hierarchical all-reduce). Exits 0, saying why, where namespaces cannot be made.
#   ARGS       passed to both programs (e.g. --sizes 1K,1M --calls 200).
# Without Open MPI (mpicc, mpirun) nccl4j runs alone and the script says how to install it; it exits 0.
# NCCL4J_CLI overrides how nccl4j is started (default: ./nccl4j from the checkout). The C program is built into
# target/bench-mpi/. Run it niced on a shared machine: nice -n 10 bash ci/bench-mpi.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
smoke=0
hosts=0
rounds=2
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; rounds=1; shift ;;
    --hosts) hosts=1; shift ;;
    --rounds) rounds="$2"; shift 2 ;;
    --) shift; args=("$@"); break ;;
    *) echo "usage: ci/bench-mpi.sh [--smoke | --hosts] [--rounds N] [-- ARGS...]" >&2; exit 2 ;;
  esac
done
if [ "$smoke" = 1 ]; then
  args=(--sizes 1K,64K --calls 20 --warmups 2 --warmup-rounds 50 --oversubscribed 200 "${args[@]}")
fi
read -r -a cli <<< "${NCCL4J_CLI:-$root/nccl4j}"
"${cli[@]}" --version >/dev/null # builds on first use, outside any timing

echo "load average at the start: $(uptime | sed 's/.*load average: //')"
mpi=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mkdir -p "$root/target/bench-mpi"
  bin="$root/target/bench-mpi/mpi_patterns"
  mpicc -O2 -Wall -Wextra -o "$bin" "$root/native/tools/bench/mpi_patterns.c" -lm
  mpirun_cmd=(mpirun --oversubscribe -np 4)
  if [ "$(id -u)" = 0 ]; then
    mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe -np 4)
  fi
  echo "$(mpirun --version 2>&1 | head -1); built $bin with mpicc"
  mpi=1
else
  echo "Open MPI not installed: nccl4j only (for the comparison: apt-get install -y openmpi-bin libopenmpi-dev)"
fi

tmp="$(mktemp -d)"
namespaces=()
cleanup() {
  local job ns
  for job in $(jobs -p); do kill "$job" 2>/dev/null || true; done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# One run of a variant: its output in $tmp/VARIANT.ROUND.out, its table rows in .rows
# (pattern|size|calls|median|p99|max|p99/median|over 4 ms|wrong); a failed run prints its output and ends the script.
run() {
  local variant="$1" round="$2" status=0
  shift 2
  "$@" >"$tmp/$variant.$round.out" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    echo "$variant, round $round: FAILED (exit $status); it printed:"
    cat "$tmp/$variant.$round.out"
    exit 1
  fi
  sed -e 's/^\[rank 0\] //' "$tmp/$variant.$round.out" | awk -F'|' 'NF == 9 {
    for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i)
    if ($1 != "pattern") print $1 "|" $2 "|" $3 "|" $4 "|" $5 "|" $6 "|" $7 "|" $8 "|" $9 }' \
    >"$tmp/$variant.$round.rows"
  if [ ! -s "$tmp/$variant.$round.rows" ] || awk -F'|' '$9 != 0 { bad = 1 } END { exit !bad }' "$tmp/$variant.$round.rows"; then
    echo "$variant, round $round: no table or wrong elements; it printed:"
    cat "$tmp/$variant.$round.out"
    exit 1
  fi
  # The arrival-skew floors follow from the delay sequences alone: every variant must print the same.
  sed -n 's/^\(\[rank 0\] \)\{0,1\}\(# arrival-skew .*\)/\2/p' "$tmp/$variant.$round.out" >"$tmp/$variant.$round.floors"
  if [ -f "$tmp/floors" ]; then
    if ! cmp -s "$tmp/floors" "$tmp/$variant.$round.floors"; then
      echo "$variant, round $round: arrival-skew floors differ from the first run's: the delay sequences disagree"
      diff "$tmp/floors" "$tmp/$variant.$round.floors" || true
      exit 1
    fi
  else
    cp "$tmp/$variant.$round.floors" "$tmp/floors"
  fi
  echo "$variant, round $round: $(grep -c . "$tmp/$variant.$round.rows") rows, every result checked, 0 wrong"
}

mpi_run() { run mpi "$1" "${mpirun_cmd[@]}" "$bin" "${args[@]}"; }
processes_run() { run processes "$1" "${cli[@]}" run --nproc-per-node 4 -- patterns --backend cpu "${args[@]}"; }
threads_run() { run threads "$1" "${cli[@]}" patterns --backend cpu --world-size 4 "${args[@]}"; }

# Two hosts: namespaces $ns_a and $ns_b at $addr_a and $addr_b, and what mpirun needs to start ranks in both.
make_hosts() {
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "hosts: skipped: network namespaces need root and iproute2 (ip)"
    exit 0
  fi
  local id net
  id=$(printf '%04x' $((RANDOM % 65536)))
  net=$((RANDOM % 200 + 20))
  ns_a="n4jm${id}a"
  ns_b="n4jm${id}b"
  addr_a="10.215.$net.1"
  addr_b="10.215.$net.2"
  subnet="10.215.$net.0/24"
  namespaces=("$ns_a" "$ns_b")
  ip netns add "$ns_a" && ip netns add "$ns_b" \
    && ip link add "v${id}a" type veth peer name "v${id}b" \
    && ip link set "v${id}a" netns "$ns_a" && ip link set "v${id}b" netns "$ns_b" \
    && ip -n "$ns_a" addr add "$addr_a/24" dev "v${id}a" && ip -n "$ns_b" addr add "$addr_b/24" dev "v${id}b" \
    && ip -n "$ns_a" link set "v${id}a" up && ip -n "$ns_b" link set "v${id}b" up \
    && ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up \
    || { echo "hosts: skipped: cannot make network namespaces here"; exit 0; }
  printf '%s slots=2\n%s slots=2\n' "$addr_a" "$addr_b" >"$tmp/hostfile"
  # mpirun starts its daemon on a "remote" host through this agent: the host's namespace instead of ssh.
  {
    echo '#!/bin/sh'
    echo 'host="$1"; shift'
    echo "case \"\$host\" in"
    echo "  $addr_a) exec ip netns exec $ns_a sh -c \"\$*\" ;;"
    echo "  $addr_b) exec ip netns exec $ns_b sh -c \"\$*\" ;;"
    echo "esac"
    echo 'echo "agent: no namespace for host $host" >&2; exit 1'
  } >"$tmp/agent.sh"
  chmod +x "$tmp/agent.sh"
  echo "hosts: namespaces $ns_a ($addr_a) and $ns_b ($addr_b) joined by a veth pair, 2 ranks in each"
}

mpi_hosts_run() {
  run mpi-tcp "$1" ip netns exec "$ns_a" mpirun --allow-run-as-root --oversubscribe -np 4 --hostfile "$tmp/hostfile" \
    --mca plm_rsh_agent "$tmp/agent.sh" --mca btl tcp,self --mca btl_tcp_if_include "$subnet" \
    --mca oob_tcp_if_include "$subnet" "$bin" "${args[@]}"
}

nccl4j_hosts_run() {
  local port=$((30000 + RANDOM % 5000)) other status=0
  local launch=(--nnodes 2 --nproc-per-node 2 --master-addr "$addr_a" --master-port "$port" --
    patterns --backend cpu "${args[@]}")
  NCCL4J_JOB_ID="bench-mpi-$1-$port" ip netns exec "$ns_b" "${cli[@]}" run --node-rank 1 "${launch[@]}" \
    >"$tmp/node1.out" 2>&1 &
  other=$!
  NCCL4J_JOB_ID="bench-mpi-$1-$port" run nccl4j-2x2 "$1" ip netns exec "$ns_a" "${cli[@]}" run --node-rank 0 \
    "${launch[@]}"
  wait "$other" || status=$?
  if [ "$status" != 0 ]; then
    echo "nccl4j-2x2, round $1: node 1 failed (exit $status); it printed:"
    cat "$tmp/node1.out"
    exit 1
  fi
}

if [ "$hosts" = 1 ]; then
  make_hosts
  export NCCL4J_JOB_TOKEN
  NCCL4J_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
fi

for r in $(seq 1 "$rounds"); do
  if [ "$hosts" = 1 ]; then
    if [ $((r % 2)) = 1 ]; then
      if [ "$mpi" = 1 ]; then mpi_hosts_run "$r"; fi
      nccl4j_hosts_run "$r"
    else
      nccl4j_hosts_run "$r"
      if [ "$mpi" = 1 ]; then mpi_hosts_run "$r"; fi
    fi
  elif [ "$smoke" = 1 ]; then
    if [ "$mpi" = 1 ]; then mpi_run "$r"; fi
    threads_run "$r"
  elif [ $((r % 2)) = 1 ]; then
    if [ "$mpi" = 1 ]; then mpi_run "$r"; fi
    processes_run "$r"
    threads_run "$r"
  else
    threads_run "$r"
    processes_run "$r"
    if [ "$mpi" = 1 ]; then mpi_run "$r"; fi
  fi
done

if [ "$smoke" = 1 ]; then
  # The checks can fail: one spoiled element must fail each side.
  status=0
  "${cli[@]}" patterns --backend cpu --world-size 4 --sizes 1K --calls 3 --warmup-rounds 1 --oversubscribed 0 \
    --inject-wrong >"$tmp/inject.out" 2>&1 || status=$?
  if [ "$status" != 1 ] || ! grep -q '^# wrong elements: 1 FAILED' "$tmp/inject.out"; then
    echo "smoke: a spoiled element did not fail nccl4j patterns (exit $status); it printed:"
    cat "$tmp/inject.out"
    exit 1
  fi
  echo "smoke: nccl4j patterns --inject-wrong: exit 1, '# wrong elements: 1 FAILED', as it must"
  if [ "$mpi" = 1 ]; then
    status=0
    "${mpirun_cmd[@]}" "$bin" --sizes 1K --calls 3 --warmup-rounds 1 --oversubscribed 0 --inject-wrong \
      >"$tmp/inject.out" 2>&1 || status=$?
    if [ "$status" = 0 ] || ! grep -q '^# wrong elements: 1 FAILED' "$tmp/inject.out"; then
      echo "smoke: a spoiled element did not fail mpi_patterns (exit $status); it printed:"
      cat "$tmp/inject.out"
      exit 1
    fi
    echo "smoke: mpi_patterns --inject-wrong: exit $status, '# wrong elements: 1 FAILED', as it must"
  fi
fi

echo
if [ "$smoke" = 1 ]; then
  echo "# smoke: few calls and warm-ups, a check of the instrument; its times are not measurements"
fi
if [ "$hosts" = 1 ]; then
  columns="mpi-tcp:MPI tcp BTL us,nccl4j-2x2:nccl4j 2x2 us"
  echo "# 2 namespaces x 2 ranks, float32 SUM all-reduce out of place; median us: each run's (per call the maximum"
else
  columns="mpi:MPI median us,processes:nccl4j processes us,threads:nccl4j threads us"
  echo "# 4 ranks, float32 SUM all-reduce out of place; median us: each run's (per call the maximum"
fi
echo "# over ranks; back-to-back and arrival-skew: time per call / step), then the median over $rounds round(s);"
echo "# ratio = nccl4j / MPI (< 1: nccl4j faster)"
# The table: per pattern and size, each variant's median over the rounds, and each variant after the first (MPI)
# divided by the first.
for f in "$tmp"/*.rows; do
  v="$(basename "$f" .rows)"
  sed "s/^/${v%.*}|/" "$f"
done | awk -F'|' -v columns="$columns" '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    if (n == 0) return ""
    for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function cell(v) { return v == "" ? "-" : sprintf("%.1f", v) }
  function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2fx", a / b) }
  function short(label,   s) { s = label; sub(/ us$/, "", s); sub(/^nccl4j /, "", s); return s " / MPI" }
  { key = $2 "|" $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key }; vals[$1, key] = vals[$1, key] " " $5 }
  END {
    nv = split(columns, col, ",")
    for (c = 1; c <= nv; c++) { split(col[c], kv, ":"); var[c] = kv[1]; label[c] = kv[2] }
    line = sprintf("%-14s | %-6s | %s", "pattern", "size", label[1])
    for (c = 2; c <= nv; c++) line = line " | " label[c] " | " short(label[c])
    print line
    for (i = 1; i <= n; i++) {
      split(order[i], k, "|")
      base = median(vals[var[1], order[i]])
      line = sprintf("%-14s | %-6s | %-" length(label[1]) "s", k[1], k[2], cell(base))
      for (c = 2; c <= nv; c++) {
        v = median(vals[var[c], order[i]])
        line = line sprintf(" | %-" length(label[c]) "s | %-" length(short(label[c])) "s", cell(v), ratio(v, base))
      }
      print line
    }
  }' | sed 's/ *$//'
echo
echo "# oversubscription, 1 KiB, a barrier before each call (target: p99 <= 3x median, no call over 4 ms):"
for f in "$tmp"/*.rows; do
  v="$(basename "$f" .rows)"
  awk -F'|' -v v="${v%.*}" -v r="${v##*.}" '$1 == "oversubscribed" {
    printf "%-10s round %s: %s calls, median %s us, p99 %s us, p99/median %s, max %s us, over 4 ms: %s\n",
      v, r, $3, $4, $5, $7, $6, $8 }' "$f"
done
cat "$tmp/floors"
echo "load average at the end: $(uptime | sed 's/.*load average: //')"
