#!/usr/bin/env bash
# NativeMemory's operations (src/jmh/java/io/nccl4j/bench/NativeMemoryAccess.java: the window words' volatile read,
# CAS and add, a fingerprint's copy, 1 KiB and 64 MiB native copies, 1 KiB to and from a heap array, the Java
# reducer's loop, malloc and free) under JMH, in three configurations, side by side:
#   17 unsafe - Java 17 (java on PATH, or JAVA_HOME): it reads no versions above 17, so the Java 17 classes over
#               sun.misc.Unsafe, as every Java 17 user gets them;
#   25 unsafe - the JDK 23+ of ci/jdk25-home.sh with -Djdk.util.jar.enableMultiRelease=false (the JDK reads no
#               versions) and --sun-misc-unsafe-memory-access=allow: the same Unsafe classes on the same JVM;
#   25 ffm    - that JDK as it loads the multi-release jar (META-INF/versions/22: java.lang.foreign). JMH itself
#               calls Unsafe (objectFieldOffset) and fails under --sun-misc-unsafe-memory-access=deny, so this runs
#               with allow too; the benchmark's setup prints the class it loaded, checked below (the deny-mode tier,
#               ci/jdk25-deny.sh, is what shows that nccl4j needs no Unsafe).
# The library comes from a multi-release jar of target/classes made here (as the build's nccl4j.jar is; a class
# directory has no versions), the benchmarks from target/test-classes, both copied first, so that a build in the
# checkout meanwhile changes nothing. Each round runs one fork of each configuration in turn, each round starting
# with the next configuration (a machine whose speed drifts moves all three alike, none always first or last). The
# results stay in target/jmh-ffm/CONFIG-ROUND.json, and ci/jmh-ffm-table.py prints, per benchmark, the median of
# every measured iteration of every round with the range of the rounds' medians (a shared machine's stalls hit
# single iterations: medians, not means), and the ratios 25 ffm / 25 unsafe (same JVM) and 25 ffm / 17 unsafe, each
# the median of the rounds' own ratios.
# Usage: ci/jmh-ffm.sh [ROUNDS [WARMUP_S MEASURE_S [REGEX]]] (default 2 rounds, 3 warm-up and 5 measured iterations
# of 1 s, every benchmark of NativeMemoryAccess; REGEX picks some, e.g. 'NativeMemoryAccess.(copy|window)');
# MVN_ARGS adds arguments to the build (MVN_ARGS=-o offline). About 2 min a round on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-2}"
wi="${2:-3}"
mi="${3:-5}"
benchmarks="${4:-NativeMemoryAccess}"

jdk="$(bash ci/jdk25-home.sh)"
export NCCL4J_JDK25_HOME="$jdk"
feature() { "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p'; }
java17=""
for j in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java || true)"; do
  if [ -n "$j" ] && [ -x "$j" ] && [ "$(feature "$j")" = 17 ]; then java17="$j"; break; fi
done
[ -n "$java17" ] || echo "ci/jmh-ffm.sh: no Java 17 (PATH, JAVA_HOME): the 17 unsafe column is left out" >&2

# shellcheck disable=SC2086
mvn -B -q ${MVN_ARGS:-} -Pjmh -DskipNativeTests test-compile
# shellcheck disable=SC2086
mvn -B -q ${MVN_ARGS:-} -Pjmh dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile=target/jmh.cp
[ -f target/classes/META-INF/versions/22/io/nccl4j/memory/NativeMemory.class ] \
  || { echo "ci/jmh-ffm.sh: target/classes has no META-INF/versions/22 classes" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf 'Multi-Release: true\n' >"$work/manifest"
"$jdk/bin/jar" --create --file "$work/nccl4j.jar" --manifest "$work/manifest" -C target/classes .
cp -r target/test-classes "$work/test-classes"
cp="$work/nccl4j.jar:$work/test-classes:$(cat target/jmh.cp)"

common=(-wi "$wi" -i "$mi" -w 1 -r 1 -f 1)
flags_ffm="--sun-misc-unsafe-memory-access=allow --enable-native-access=ALL-UNNAMED"
flags_unsafe25="--sun-misc-unsafe-memory-access=allow -Djdk.util.jar.enableMultiRelease=false --enable-native-access=ALL-UNNAMED"

# Which class each configuration runs, checked before timing, by the line the benchmark's setup prints.
expect() { # CONFIG EXPECTED JAVA [JVM FLAGS]
  local out
  out="$("$3" -cp "$cp" org.openjdk.jmh.Main 'NativeMemoryAccess.copy1KiB' -wi 0 -i 1 -r 100ms -f 1 \
    ${4:+-jvmArgsAppend "$4"} 2>&1)" || true
  grep -q "# NativeMemory: $2\$" <<<"$out" \
    || { echo "ci/jmh-ffm.sh: $1 did not run NativeMemory over $2:" >&2; echo "$out" >&2; exit 1; }
  echo "# $1: NativeMemory over $2"
}
[ -z "$java17" ] || expect "17 unsafe" sun.misc "$java17"
expect "25 unsafe" sun.misc "$jdk/bin/java" "$flags_unsafe25"
expect "25 ffm" java.lang.foreign "$jdk/bin/java" "$flags_ffm"

echo "# $("$jdk/bin/java" -version 2>&1 | head -1); ${java17:+$("$java17" -version 2>&1 | head -1); }$rounds rounds of one fork each, ${wi}x1 s warm-up, ${mi}x1 s measured; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
out="$PWD/target/jmh-ffm"
rm -rf "$out"
mkdir -p "$out"
# one CONFIG ROUND: one fork of that configuration, its results in $out/CONFIG-ROUND.json.
one() {
  local c="$1" r="$2" j flags=()
  case "$c" in
    17unsafe) j="$java17" ;;
    25unsafe) j="$jdk/bin/java"; flags=(-jvmArgsAppend "$flags_unsafe25") ;;
    25ffm) j="$jdk/bin/java"; flags=(-jvmArgsAppend "$flags_ffm") ;;
  esac
  "$j" -cp "$cp" org.openjdk.jmh.Main "$benchmarks" "${common[@]}" "${flags[@]}" -rf json -rff "$out/$c-$r.json" \
    >"$work/$c-$r.log" 2>&1 || { cat "$work/$c-$r.log" >&2; exit 1; }
}
configs=(25unsafe 25ffm)
[ -z "$java17" ] || configs=(17unsafe "${configs[@]}")
for ((r = 1; r <= rounds; r++)); do
  # Each round starts one configuration later than the one before, so that none always runs first or last.
  n=${#configs[@]}
  for ((k = 0; k < n; k++)); do
    one "${configs[$(((r - 1 + k) % n))]}" "$r"
  done
  echo "# round $r done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

python3 ci/jmh-ffm-table.py "$out"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
