#!/usr/bin/env bash
# The CPU backend's AllReduce on nccl4j's two off-heap classes, side by side on one JDK 23+ (ci/jdk25-home.sh):
#   ffm    - the multi-release jar as Java 22+ loads it (META-INF/versions/22, java.lang.foreign), with
#            --sun-misc-unsafe-memory-access=deny;
#   unsafe - the same jar with -Djdk.util.jar.enableMultiRelease=false (the JDK then reads no versions: the Java 17
#            classes over sun.misc.Unsafe) and --sun-misc-unsafe-memory-access=allow.
# For each case (1 KiB and 64 MiB, 2 ranks as threads and as processes over shared memory) it runs `sweep` ROUNDS
# times for each, alternating ffm and unsafe (so that a machine whose speed drifts moves both), and prints the median
# of the sweep's own time per call (out of place, in place) for each and their ratio ffm/unsafe, with the load
# average before and after. Usage: ci/bench-ffm.sh [ROUNDS] (default 7), after `mvn package` built
# target/nccl4j-cli.jar with the Java 22 classes (NCCL4J_JDK25_HOME set, or Maven on Java 22+).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"
jdk="$(bash ci/jdk25-home.sh)"
java="$jdk/bin/java"
cli="$PWD/target/nccl4j-cli.jar"
unzip -l "$cli" META-INF/versions/22/io/nccl4j/memory/NativeMemory.class >/dev/null \
  || { echo "ci/bench-ffm.sh: $cli has no Java 22 classes; build it with NCCL4J_JDK25_HOME set" >&2; exit 2; }

ffm=(--sun-misc-unsafe-memory-access=deny --enable-native-access=ALL-UNNAMED)
unsafe=(--sun-misc-unsafe-memory-access=allow -Djdk.util.jar.enableMultiRelease=false --enable-native-access=ALL-UNNAMED)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# sweep_times MODE FLAGS... -- SWEEP_ARGS...: one sweep; prints "out in" (µs per call) of its one size.
sweep_times() {
  local mode="$1"; shift
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  local out="$work/out"
  if [ "$mode" = threads ]; then
    (cd "$work" && "$java" "${flags[@]}" -jar "$cli" sweep --backend cpu --world-size 2 "$@") >"$out" 2>&1
  else
    # run starts each rank with the launcher's java and NCCL4J_JAVA_OPTS; rank 0's line is the one read.
    (cd "$work" && NCCL4J_JAVA_OPTS="${flags[*]}" "$java" "${flags[@]}" -jar "$cli" run --nproc-per-node 2 -- \
      sweep --backend cpu "$@") >"$out" 2>&1
  fi
  if grep -q 'Unsafe\|UnsupportedOperationException\|WARNING' "$out"; then
    echo "ci/bench-ffm.sh: the sweep warned or failed:" >&2
    cat "$out" >&2
    exit 1
  fi
  sed 's/^\[rank 0\] //' "$out" | awk -F'|' '$1 ~ /^[0-9]+ *$/ { gsub(/ /, "", $6); gsub(/ /, "", $10); print $6, $10; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $("$java" -version 2>&1 | head -1); $rounds rounds, alternating; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-9s %-7s | %12s %12s %7s | %12s %12s %7s\n' mode size "ffm out" "unsafe out" ratio "ffm in" "unsafe in" ratio
for spec in "threads 1K -n 2000 -w 200" "processes 1K -n 2000 -w 200" "threads 64M -n 20 -w 3" \
    "processes 64M -n 20 -w 3"; do
  set -- $spec
  mode="$1" size="$2"; shift 2
  : >"$work/ffm"; : >"$work/unsafe"
  for ((r = 0; r < rounds; r++)); do
    sweep_times "$mode" "${ffm[@]}" -- -b "$size" -e "$size" "$@" >>"$work/ffm"
    sweep_times "$mode" "${unsafe[@]}" -- -b "$size" -e "$size" "$@" >>"$work/unsafe"
  done
  fo="$(cut -d' ' -f1 "$work/ffm" | median)"; fi_="$(cut -d' ' -f2 "$work/ffm" | median)"
  uo="$(cut -d' ' -f1 "$work/unsafe" | median)"; ui="$(cut -d' ' -f2 "$work/unsafe" | median)"
  printf '%-9s %-7s | %12.2f %12.2f %7.3f | %12.2f %12.2f %7.3f\n' "$mode" "$size" "$fo" "$uo" \
    "$(echo "$fo / $uo" | bc -l)" "$fi_" "$ui" "$(echo "$fi_ / $ui" | bc -l)"
  echo "#   ffm: $(cut -d' ' -f1 "$work/ffm" | paste -sd' ')   unsafe: $(cut -d' ' -f1 "$work/unsafe" | paste -sd' ') (out of place, µs)"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
