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
# Usage: ci/bench-mpi.sh [--smoke] [--rounds N] [-- ARGS...]
#   (default)  2 rounds, every size (1K, 64K, 1M, 16M, 64M), the default calls (about 4 minutes on 2 cores).
#   --smoke    1 KiB and 64 KiB, 20 calls, nccl4j as threads only (and MPI when it is installed), one round; then
#              proves that a wrong element fails each side (--inject-wrong must exit 1). For CI: seconds.
#   ARGS       passed to both programs (e.g. --sizes 1K,1M --calls 200).
# Without Open MPI (mpicc, mpirun) nccl4j runs alone and the script says how to install it; it exits 0.
# NCCL4J_CLI overrides how nccl4j is started (default: ./nccl4j from the checkout). The C program is built into
# target/bench-mpi/. Run it niced on a shared machine: nice -n 10 bash ci/bench-mpi.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
smoke=0
rounds=2
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; rounds=1; shift ;;
    --rounds) rounds="$2"; shift 2 ;;
    --) shift; args=("$@"); break ;;
    *) echo "usage: ci/bench-mpi.sh [--smoke] [--rounds N] [-- ARGS...]" >&2; exit 2 ;;
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
trap 'rm -rf "$tmp"' EXIT

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

for r in $(seq 1 "$rounds"); do
  if [ "$smoke" = 1 ]; then
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
echo "# 4 ranks, float32 SUM all-reduce out of place; median us: each run's (per call the maximum over ranks; back-to-back"
echo "# and arrival-skew: time per call / step), then the median over $rounds round(s); ratio = nccl4j / MPI (< 1: nccl4j faster)"
for f in "$tmp"/*.rows; do
  v="$(basename "$f" .rows)"
  sed "s/^/${v%.*}|/" "$f"
done | awk -F'|' -v mpi="$mpi" '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    if (n == 0) return ""
    for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function cell(v) { return v == "" ? "-" : sprintf("%.1f", v) }
  function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2fx", a / b) }
  { key = $2 "|" $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key }; vals[$1, key] = vals[$1, key] " " $5 }
  END {
    fmt = "%-14s | %-6s | %-13s | %-19s | %-16s | %-17s | %s\n"
    printf fmt, "pattern", "size", "MPI median us", "nccl4j processes us", "processes / MPI", "nccl4j threads us",
      "threads / MPI"
    for (i = 1; i <= n; i++) {
      split(order[i], k, "|")
      m = median(vals["mpi", order[i]]); p = median(vals["processes", order[i]]); t = median(vals["threads", order[i]])
      printf fmt, k[1], k[2], cell(m), cell(p), ratio(p, m), cell(t), ratio(t, m)
    }
  }'
echo
echo "# oversubscription, 1 KiB, a barrier before each call (target: p99 <= 3x median, no call over 4 ms):"
for f in "$tmp"/*.rows; do
  v="$(basename "$f" .rows)"
  awk -F'|' -v v="${v%.*}" -v r="${v##*.}" '$1 == "oversubscribed" {
    printf "%-9s round %s: %s calls, median %s us, p99 %s us, p99/median %s, max %s us, over 4 ms: %s\n",
      v, r, $3, $4, $5, $7, $6, $8 }' "$f"
done
cat "$tmp/floors"
echo "load average at the end: $(uptime | sed 's/.*load average: //')"
