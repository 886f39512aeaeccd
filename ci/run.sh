#!/usr/bin/env bash
# CI's script (its entry, .ci/run, execs it): runs the README's test command (the line ending in `# the tests`),
# then the README's main job (the line ending in `# the main job`) as a smoke test, then the builds and checks below,
# the deny-mode tier on Java 25 among them (ci/jdk25-deny.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

test_cmd="$(grep -m1 -E '^mvn .*# the tests' README.md | sed 's/#.*//')"
main_cmd="$(grep -m1 -E '^\./nccl4j .*# the main job' README.md | sed 's/#.*//')"
if [ -z "$test_cmd" ] || [ -z "$main_cmd" ]; then
  echo "ci/run.sh: README.md must start with the main-job and test commands" >&2
  exit 2
fi

# PyTorch as the oracle of the store's wire and of torchrun (PyTorchStoreTest, TorchrunTest, ...): Debian's
# python3-torch (1.13, the legacy dialect; about 70 s with apt-get update on a fresh machine) and torch 2.13 for CPU
# from the wheel this machine keeps on disk, with its dependencies from the local index, in target/torch-venv. Either
# missing makes those tests skip, saying so. The two installs share nothing (dpkg's files; a venv of its own), so they
# run side by side, each into its own log, printed when both have ended. pip first tries each index once: where
# pypi.org cannot be reached, its default five retries with back-off cost about 110 s of this step (measured: 26 s
# with --retries 0, 136 s without); where one try fails, the install runs again with pip's retries.
logs="$(mktemp -d)"
if [ "$(id -u)" = 0 ] && ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo "==> apt-get install -y python3-torch (beside the next install)"
  ( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null) \
    || echo "ci/run.sh: python3-torch not installed; the legacy-dialect tests will skip" ) >"$logs/apt" 2>&1 &
fi
if [ ! -x target/torch-venv/bin/python ]; then
  echo "==> python3 -m venv target/torch-venv && pip install torch==2.13.0+cpu"
  ( (python3 -m venv target/torch-venv \
      && { target/torch-venv/bin/pip install -q --retries 0 "torch==2.13.0+cpu" \
           || target/torch-venv/bin/pip install -q "torch==2.13.0+cpu"; }) \
    || echo "ci/run.sh: torch 2.13 not installed; the current-dialect tests will skip" ) >"$logs/pip" 2>&1 &
fi
wait
cat "$logs"/* >&2 2>/dev/null || true
rm -rf "$logs"

# A JDK 23+ (ci/jdk25-home.sh: NCCL4J_JDK25_HOME, JAVA_HOME, PATH, /usr/lib/jvm and the other usual places; CI's
# machines come with Temurin 25 under /usr/lib/jvm, and Debian 12 packages none after 17): exported, every build
# below compiles nccl4j's Java 22+ classes (java.lang.foreign, META-INF/versions/22) with its javac, so the jars, the
# installed artifact and the CLI jar are the multi-release ones; the deny-mode tier at the end runs on it. Where none
# is found, one that apt offers is installed (an offered one that fails to install fails CI); where none can be had,
# the builds say they have no Java 22 classes and the deny-mode tier prints that it skipped.
jdk25_rc=0
jdk25="$(bash ci/jdk25-home.sh --install)" || jdk25_rc=$?
case "$jdk25_rc" in
  0)
    export NCCL4J_JDK25_HOME="$jdk25"
    echo "==> NCCL4J_JDK25_HOME=$jdk25 (Java 22+ classes built with its javac)" ;;
  1) echo "ci/run.sh: no JDK 23+ found or installable: the jars carry no Java 22+ classes, and the deny-mode tier will skip" ;;
  *) echo "ci/run.sh: a JDK 23+ could be installed and was not (above)" >&2; exit "$jdk25_rc" ;;
esac

echo "==> $test_cmd"
eval "$test_cmd"

echo "==> $main_cmd"
eval "$main_cmd"

# nccl4j beside Open MPI at smoke size (ci/bench-mpi.sh; docs/PERFORMANCE.md, "Beside Open MPI"): the instrument checks
# every result and proves that a spoiled element fails it. CI does not install Open MPI (apt-get install openmpi-bin
# libopenmpi-dev took 36 s on a build machine, 46 packages, more than this step may cost); without it nccl4j runs
# alone, and where it is installed the MPI side runs and is checked too.
echo "==> bash ci/bench-mpi.sh --smoke"
bash ci/bench-mpi.sh --smoke

# The benchmarks compile (they implement the native seams, which grow with the binding).
jmh=(mvn -B -q -Pjmh -DskipNativeTests test-compile)
echo "==> ${jmh[*]}"
"${jmh[@]}"

# The CUDA 12 binding line (-Pcuda12) builds, and its bindings work against the real libnccl.so.2
# and on the fault-injection seam.
line12=(mvn -B -Pcuda12 test -Dsurefire.failIfNoSpecifiedTests=false
  "-Dtest=io.nccl4j.nccl.**.*Test")
echo "==> ${line12[*]}"
"${line12[@]}"

# The library as applications get it: installed with its sources and javadoc (reusing the build
# above; its tests ran there, so they are not even compiled again), then the consumer project
# samples/app, which depends on that artifact, builds and runs its tests.
version="$(sed -n '0,/<version>/s:.*<version>\(.*\)</version>.*:\1:p' pom.xml)"
if ! grep -q "<nccl4j.version>$version</nccl4j.version>" samples/app/pom.xml; then
  echo "ci/run.sh: samples/app/pom.xml must depend on nccl4j $version, the version pom.xml builds" >&2
  exit 1
fi
install=(mvn -B -q -Dmaven.test.skip=true -DskipNativeTests install)
echo "==> ${install[*]}"
"${install[@]}"
app=(mvn -B -f samples/app/pom.xml verify)
echo "==> ${app[*]}"
"${app[@]}"

# nccl4j on Apache Spark (spark/): a project of its own on the installed artifact, as samples/app. Its first build
# downloads Spark 4.2 and its dependencies (about 200 MB); its tests run Spark in local mode and with executors as
# JVMs of their own (local-cluster mode). The heavier cases wait for -Pnightly (spark/README.md).
if ! grep -q "<nccl4j.version>$version</nccl4j.version>" spark/pom.xml; then
  echo "ci/run.sh: spark/pom.xml must depend on nccl4j $version, the version pom.xml builds" >&2
  exit 1
fi
spark=(mvn -B -f spark/pom.xml verify)
echo "==> ${spark[*]}"
"${spark[@]}"

# The CLI jar runs on its own, from outside the checkout.
cli="$PWD/target/nccl4j-cli.jar"
away="$(mktemp -d)"
echo "==> (cd $away && java -jar $cli demo)"
(cd "$away" && java -jar "$cli" demo)
# The jar alone gives run --class's ranks the library and its dependencies only (unpacked from the jar, here into a
# cache of the check's own): an application with an SLF4J binding of its own (the tests' LoggingAppMain with
# slf4j-nop) hears no SLF4J warning, and each rank's all-reduce is right.
app_cp="$PWD/target/test-classes:$PWD/target/test-app/slf4j-nop.jar"
echo "==> (cd $away && java -jar $cli run --nproc-per-node 2 --class io.nccl4j.cli.LoggingAppMain --classpath $app_cp -- 60)"
run_out="$(cd "$away" && XDG_CACHE_HOME="$away/cache" java -jar "$cli" run --nproc-per-node 2 \
  --class io.nccl4j.cli.LoggingAppMain --classpath "$app_cp" -- 60 2>&1)" || { echo "$run_out" >&2; exit 1; }
echo "$run_out"
if grep -q SLF4J <<<"$run_out" || [ "$(grep -c ' right$' <<<"$run_out")" != 2 ]; then
  echo "ci/run.sh: expected no SLF4J line and two ranks' 'right' from run --class, got the output above" >&2
  exit 1
fi
rm -rf "$away"

# nccl4j without sun.misc.Unsafe: the conformance suites and the off-heap and shared-memory tests on that JDK with
# --sun-misc-unsafe-memory-access=deny, the jars' Multi-Release manifests and versions/22 classes, and the CLI jar's
# demo under deny from outside the checkout (ci/jdk25-deny.sh; it prints its time). Skips, saying so, where there is
# no JDK 23+.
echo "==> bash ci/jdk25-deny.sh conformance"
bash ci/jdk25-deny.sh conformance

# The GPU check proves itself here, where there is no GPU: ci/gpu-check.sh selftest builds the bundle a GPU machine
# gets (reusing the build above) and runs it as that machine would — its jlink'd runtime and jars, the launcher with
# processes, the C probe, the JNI binding against the native tests' libnccl and a driver stub — and fails when the
# runtime lacks a module the jars need, a library path is wrong, a JUnit step ran no test, info cannot see NCCL, or the
# bundle is over its 48 MiB budget (44 s here, reusing the build above).
echo "==> bash ci/gpu-check.sh selftest"
bash ci/gpu-check.sh selftest
