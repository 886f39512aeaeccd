#!/usr/bin/env bash
# nccl4j on a JDK 25 that refuses sun.misc.Unsafe's memory access (docs/API.md, "Java 22 and later"):
#   1. the tier named as $1 with -Pjdk25-deny: the test JVMs are that JDK's, started with
#      --sun-misc-unsafe-memory-access=deny and --enable-native-access=ALL-UNNAMED, and load nccl4j from a
#      multi-release jar of target/classes, so they run the java.lang.foreign classes of META-INF/versions/22.
#      conformance (the default, CI's): the quick tier's conformance suites (every collective on threads, TCP,
#      shared memory, hierarchical and subgroups) and the off-heap and shared-memory window tests (io.nccl4j.memory,
#      io.nccl4j.internal.transport.shm: flag words, futexes, deadlines); about 4 min here. quick: the whole quick
#      tier (about 6 min). ci: the CI tier;
#   2. target/nccl4j-cli.jar, when it has been built: both jars say Multi-Release: true and carry those classes, and
#      `java --sun-misc-unsafe-memory-access=deny -jar target/nccl4j-cli.jar demo` passes from outside the checkout.
# The JDK is ci/jdk25-home.sh's (NCCL4J_JDK25_HOME, else the newest JDK 23+ of the usual places; with CI=true one
# that apt offers is installed). Where there is none the script prints a line that says it SKIPPED, and why, and exits
# 0: Debian 12's packages have no JDK after 17, so only a machine that came with one (CI's has Temurin 25) runs this
# tier. A JDK that apt offers and fails to install is an error.
# MVN_ARGS adds arguments to Maven's (MVN_ARGS=-o offline).
set -euo pipefail
cd "$(dirname "$0")/.."
tier="${1:-conformance}"
begin=$SECONDS

home_rc=0
jdk="$(bash ci/jdk25-home.sh $([ "${CI:-}" = true ] && echo --install))" || home_rc=$?
if [ "$home_rc" = 1 ]; then
  echo "ci/jdk25-deny.sh: SKIPPED the deny-mode tier: no JDK 23 or later here (set NCCL4J_JDK25_HOME to one)"
  exit 0
elif [ "$home_rc" != 0 ]; then
  echo "ci/jdk25-deny.sh: no JDK 23 or later, though one could be installed (above)" >&2
  exit "$home_rc"
fi
export NCCL4J_JDK25_HOME="$jdk"
deny=(--sun-misc-unsafe-memory-access=deny)
echo "ci/jdk25-deny.sh: $("$jdk/bin/java" -version 2>&1 | head -1) at $jdk"

case "$tier" in
  conformance) tests=(mvn -B ${MVN_ARGS:-} -DskipNativeTests -Pquick,jdk25-deny -Dsurefire.failIfNoSpecifiedTests=false
                 "-Dtest=io.nccl4j.conformance.*Test,io.nccl4j.memory.*Test,io.nccl4j.internal.transport.shm.*Test"
                 test) ;;
  quick) tests=(mvn -B ${MVN_ARGS:-} -DskipNativeTests -Pquick,jdk25-deny test) ;;
  ci) tests=(mvn -B ${MVN_ARGS:-} -DskipNativeTests -Pjdk25-deny test) ;;
  *) echo "ci/jdk25-deny.sh: unknown tier '$tier' (conformance, quick or ci)" >&2; exit 2 ;;
esac
echo "==> NCCL4J_JDK25_HOME=$jdk ${tests[*]}"
start=$SECONDS
"${tests[@]}"
echo "ci/jdk25-deny.sh: the $tier tier passed on $jdk with ${deny[*]} in $((SECONDS - start)) s"

cli="$PWD/target/nccl4j-cli.jar"
if [ ! -f "$cli" ]; then
  echo "ci/jdk25-deny.sh: no $cli (mvn package builds it): the CLI jar's checks skipped; $((SECONDS - begin)) s in all"
  exit 0
fi
# The CLI jar, the library's jar, and the library's jar inside the CLI jar (META-INF/nccl4j-lib: run --class's ranks).
away="$(mktemp -d)"
(cd "$away" && unzip -q "$cli" META-INF/nccl4j-lib/nccl4j.jar)
for jar in "$cli" target/nccl4j.jar "$away/META-INF/nccl4j-lib/nccl4j.jar"; do
  if ! unzip -p "$jar" META-INF/MANIFEST.MF | tr -d '\r' | grep -qx 'Multi-Release: true'; then
    echo "ci/jdk25-deny.sh: $jar's manifest lacks Multi-Release: true" >&2
    exit 1
  fi
  for c in NativeMemory DirectBuffers; do
    if ! unzip -l "$jar" "META-INF/versions/22/io/nccl4j/memory/$c.class" >/dev/null; then
      echo "ci/jdk25-deny.sh: $jar has no META-INF/versions/22/io/nccl4j/memory/$c.class" >&2
      exit 1
    fi
  done
done
echo "==> (cd $away && $jdk/bin/java ${deny[*]} -jar $cli demo)"
(cd "$away" && "$jdk/bin/java" "${deny[@]}" -jar "$cli" demo) 2>&1 | tee "$away/demo.log"
# No warning either: the jar's manifest grants JavaCPP and nccl4j native access, and nothing touches Unsafe.
if grep -q '^WARNING' "$away/demo.log"; then
  echo "ci/jdk25-deny.sh: the CLI jar printed warnings on $jdk (above)" >&2
  exit 1
fi
rm -rf "$away"
echo "ci/jdk25-deny.sh: the jars and the CLI jar's demo passed under ${deny[*]}; $((SECONDS - begin)) s in all"
