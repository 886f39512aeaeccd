#!/usr/bin/env bash
# nccl4j's GPU checks. The GPU machine has no Java and no network, and one run there is all there may be,
# so the bundle is built elsewhere and proven here first:
#
#   ci/gpu-check.sh prepare   on a build machine (JDK 17, Maven, Maven Central): builds target/gpu-bundle, at most
#                             NCCL4J_GPU_BUNDLE_MIB (48) so that with the project tree it travels in the 64 MiB a
#                             device run carries: a jlink'd Java runtime of the modules jdeps finds in the jars it
#                             carries (less those no step loads a class of),
#                             the jars, the test classes, the JUnit console launcher, the C probe, and the CUDA
#                             runtime of the binding line (from bytedeco's cuda-redist jar).
#   ci/gpu-check.sh run       on the GPU machine, from the repository root with target/gpu-bundle (carry it).
#                             Writes two files into $OUT (or target/gpu-report): gpu-report.txt and
#                             gpu-logs.tar.gz. Exits 0 when every check passed, 1 when one failed, 2 without a
#                             bundle, 3 without a GPU.
#   ci/gpu-check.sh selftest  on a machine without GPU or driver (CI runs it): prepares the bundle (reusing the
#                             build's outputs when they are there) and runs it as the GPU machine would — its
#                             own Java runtime and jars, the launcher with processes over the TCP store, the
#                             contracts, the C probe, and the JNI binding loading a real libnccl.so.2 (the native
#                             tests' fixture) against a CUDA driver stub — with the same steps `run` uses. Fails
#                             when the runtime lacks a module the jars need, a library path is wrong, or a JUnit
#                             step ran no test, info cannot see NCCL, a class came from outside the bundle, or the
#                             bundle is over its budget; reports what the steps' JVMs loaded. Exits 0 when all is as
#                             expected.
#
# Run: versions first (the GPU, the driver, CUDA, torch, the NCCL wheel pip has, and the libnccl file torch maps,
# which Java and the C probe then load); then checks, most valuable first, each under its own `timeout` and a total
# budget of 330 s (a check that would start past it is reported as not run): PyTorch's own NCCL all-reduce (tells
# "NCCL does not work in this sandbox" apart from "nccl4j is broken"), info, the gpu-tagged tests at world size 1,
# the Java and C probes side by side with their 1 KiB latency; where the NCCL has it (>= 2.30), world size 2 on the
# one GPU as processes: the contracts and the equivalence under nccl4j's launcher, the contracts under torchrun, a
# PyTorch rank and a Java rank in one group (ci/mixed-group.sh); the kernels of the one-rank AVG AllReduce counted
# by ncu where it can read counters; and, when a gpu test failed, that one test again under NCCL_DEBUG=INFO
# (NCCL_DEBUG_SUBSYS=INIT,ENV), then under NCCL_CUMEM_ENABLE=0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$root/target/gpu-bundle"
carry_mib=64
budget_s="${NCCL4J_GPU_BUDGET_S:-330}"
# What the bundle may weigh: with the project tree it must travel in the 64 MiB a device run carries, and what stays
# below is left for the project to grow.
bundle_budget_mib="${NCCL4J_GPU_BUNDLE_MIB:-48}"
# Modules jdeps finds in the carried jars that no step loads a class of (the self-test's class-load log shows it):
# java.desktop through the samples' charts (bench, memory and sweep draw them, the GPU run starts none), Jackson's
# optional java.beans support (it goes on without) and a CLI test that reads back a PNG; java.compiler through the
# test that checks the public API's javadoc. Leaving them out keeps the runtime 10 MiB smaller.
unused_modules="java.desktop java.compiler"
# The gpu-tagged tests a GPU machine runs.
gpu_classes=(io.nccl4j.nccl.NcclGpuTest io.nccl4j.nccl.InteropGpuTest io.nccl4j.conformance.NcclConformanceTest)

# ====================================================================== prepare

# jre_modules JAR...: the Java modules the classes of the jars need (jdeps), plus the service providers jdeps cannot
# see: jdk.zipfs (the jar: file system, reached through ServiceLoader: JUnit's class-path scanning of jars finds
# nothing without it). The jars are unpacked into one class tree
# first: jdeps resolves modular jars (progressbar, slf4j, javacpp) as modules and then needs their readers too.
jre_modules() {
  local tree v
  tree="$(mktemp -d)"
  for j in "$@"; do
    unzip -q -o "$j" -d "$tree" -x 'module-info.class' 'META-INF/*.SF' 'META-INF/*.RSA' 'META-INF/*.DSA' 2>/dev/null || true
  done
  # Multi-release jars: the classes a Java 17 runtime loads are those of versions 9 … 17 over the base ones.
  for v in 9 10 11 12 13 14 15 16 17; do
    if [ -d "$tree/META-INF/versions/$v" ]; then
      cp -r "$tree/META-INF/versions/$v/." "$tree/"
    fi
  done
  find "$tree" -name module-info.class -delete
  rm -rf "$tree/META-INF"
  local found
  found="$(jdeps --print-module-deps --ignore-missing-deps "$tree")"
  rm -rf "$tree"
  echo "$found,jdk.zipfs" | tr ',' '\n' | grep -v '^$' | grep -vxF -f <(echo "$unused_modules" | tr ' ' '\n') \
    | sort -u | paste -sd, -
}

prepare() {
  cd "$root"
  local cuda_version junit_version redist
  cuda_version="$(sed -n 's:.*<cuda.presets.version>\(.*\)</cuda.presets.version>.*:\1:p' pom.xml | head -n 1)"
  junit_version="1.14.1"
  if [ "${NCCL4J_GPU_PREPARE_REUSE:-0}" = 1 ] && [ -f target/nccl4j.jar ] && [ -d target/classes/io/nccl4j/cli ] \
      && [ -d target/test-classes/io/nccl4j/nccl ] && [ -x target/native/nccl_probe ] \
      && [ -z "$(find target/classes -newer target/nccl4j.jar -print -quit)" ]; then
    echo "gpu-check: reusing the build's outputs (target/nccl4j.jar, classes, test classes, nccl_probe)" >&2
  else
    echo "gpu-check: building nccl4j (tests compiled, not run)" >&2
    mvn -q -B -DskipNativeTests -DskipTests package
  fi
  mvn -q -B -DskipNativeTests dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$root/target/test-classpath.txt"
  if [ ! -f "$root/target/junit-console/junit-platform-console-standalone.jar" ]; then
    mvn -q -B dependency:copy -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_version" \
      -DoutputDirectory="$root/target/junit-console" -Dmdep.stripVersion=true
  fi
  redist="$HOME/.m2/repository/org/bytedeco/cuda-redist/$cuda_version/cuda-redist-$cuda_version-linux-x86_64.jar"
  if [ ! -f "$redist" ]; then
    mvn -q -B dependency:get -Dartifact="org.bytedeco:cuda-redist:$cuda_version:jar:linux-x86_64" -Dtransitive=false
  fi

  rm -rf "$bundle"
  mkdir -p "$bundle/jars" "$bundle/lib"
  cp "$root/target/nccl4j.jar" "$bundle/jars/"
  # The library jar leaves the samples (the CLI) out; the bundle runs them from target/classes.
  (cd "$root/target/classes" && jar cf "$bundle/jars/nccl4j-samples.jar" io/nccl4j/cli)
  (cd "$root/target/test-classes" && jar cf "$bundle/jars/nccl4j-tests.jar" .)
  tr ':' '\n' < "$root/target/test-classpath.txt" | while read -r j; do
    case "$j" in
      # Not needed on the GPU machine: the console launcher brings JUnit itself; ArchUnit and
      # byte-buddy (AssertJ's optional proxies) only serve tests that do not run there; pdfbox and
      # fontbox only XChart's PDF export; the cuda-redist jar is 343 MB, of which only libcudart is
      # needed (copied below).
      *redist*|*/junit-*|*/opentest4j-*|*/apiguardian-*|*/archunit*|*/byte-buddy-*|*/pdfbox-*|*/fontbox-*|*/pytorch-*|"") ;;
      # Never loaded by the steps (the self-test's class-load log shows it): the charts (XChart and what it draws
      # with; bench, memory and sweep draw them, the GPU run starts none), the progress bar and its terminal (the
      # same commands), awaitility and hamcrest (no gpu test waits with them), commons-logging.
      */xchart-*|*/VectorGraphics2D-*|*/graphics2d-*|*/animated-gif-lib-*|*/progressbar-*|*/jline-*|*/awaitility-*\
      |*/hamcrest-*|*/commons-logging-*) ;;
      # Of bytedeco's JNI libraries only the CUDA runtime's and NCCL's are loaded.
      *cuda-*-linux-x86_64.jar)
        local t
        t="$(mktemp -d)"
        (cd "$t" && unzip -q "$j" 'META-INF/*' 'org/bytedeco/cuda/linux-x86_64/libjnicudart.so' \
          'org/bytedeco/cuda/linux-x86_64/libjninccl.so' && jar cfM "$bundle/jars/$(basename "$j")" .)
        rm -rf "$t" ;;
      # Of bytedeco's CUDA classes only the CUDA runtime's and NCCL's are loaded; cuDNN, cuBLAS, NPP, NVML, CUPTI… are
      # most of the jar.
      */cuda-[0-9]*.jar)
        local c
        c="$(mktemp -d)"
        (cd "$c" && unzip -q "$j" 'META-INF/*' 'org/bytedeco/cuda/cudart/*' 'org/bytedeco/cuda/nccl/*' \
          'org/bytedeco/cuda/global/cudart*' 'org/bytedeco/cuda/global/nccl*' 'org/bytedeco/cuda/presets/cudart*' \
          'org/bytedeco/cuda/presets/nccl*' && jar cfM "$bundle/jars/$(basename "$j")" .)
        rm -rf "$c" ;;
      *) cp "$j" "$bundle/jars/" ;;
    esac
  done
  cp "$root/target/junit-console/junit-platform-console-standalone.jar" "$bundle/"
  cp "$root/target/native/nccl_probe" "$bundle/"
  unzip -q -o -j "$redist" 'org/bytedeco/cuda/linux-x86_64/libcudart.so.*' -d "$bundle/lib"

  local modules
  modules="$(jre_modules "$bundle"/jars/*.jar "$bundle/junit-platform-console-standalone.jar")"
  echo "gpu-check: jlink $modules (jdeps over the carried jars)" >&2
  echo "$modules" > "$bundle/jre-modules.txt"
  # Without the certificate stores: the GPU machine has no network, and nothing carried speaks TLS.
  jlink --add-modules "$modules" --strip-debug --no-header-files --no-man-pages --compress=2 \
    --exclude-files='**/security/cacerts,**/security/public_suffix_list.dat' --output "$bundle/jre"
  # The JVM's own symbol table (4 of its 24 MB) serves debuggers only.
  if command -v strip >/dev/null; then
    strip --strip-unneeded "$bundle/jre/lib/server/libjvm.so"
  fi
  check_bundle_size
}

# check_bundle_size: the bundle's size against its budget (and against what the carry leaves beside the project tree);
# prints the figure, fails above either.
check_bundle_size() {
  local size tree limit budget
  size=$(du -sb "$bundle" | cut -f1)
  tree=$(git -C "$root" ls-files -z 2>/dev/null | (cd "$root" && xargs -0 cat 2>/dev/null) | wc -c)
  limit=$(( (carry_mib - 1) * 1048576 - tree ))
  budget=$(( bundle_budget_mib * 1048576 ))
  bundle_size_line="bundle $(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }') MiB (budget $bundle_budget_mib MiB;"\
" the ${carry_mib} MiB carry leaves $((limit / 1048576)) MiB beside the $((tree / 1048576)) MiB project tree)"
  echo "gpu-check: $bundle_size_line" >&2
  if [ "$size" -gt "$budget" ] || [ "$size" -gt "$limit" ]; then
    echo "gpu-check: the bundle is over its budget: see what the self-test's class-load log says is never loaded" >&2
    exit 1
  fi
}

# ====================================================================== the steps run and selftest share

# bundle_env: the bundle's Java and class path, the CUDA runtime file it carries; restores the execute bits that
# a copy to the GPU machine may have dropped (the JVM, jspawnhelper, which starts the launcher's processes, the probe).
bundle_env() {
  chmod +x "$bundle"/jre/bin/* "$bundle"/jre/lib/jspawnhelper "$bundle/nccl_probe" 2>/dev/null || true
  java="$bundle/jre/bin/java"
  cp="$(ls "$bundle"/jars/*.jar | tr '\n' ':')"
  cli=("$java" -cp "$cp" io.nccl4j.cli.Cli)
  # The C probe dlopens NCCL4J_CUDART_PATH as it is: a file, not its directory.
  cudart="$(ls "$bundle"/lib/libcudart.so.* 2>/dev/null | head -n 1)"
  export NCCL4J_CUDART_PATH="$cudart"
}

say() { echo "$*" | tee -a "$report"; }

# check NAME SECONDS COMMAND...: runs it under `timeout` within the budget, keeps its output, records the outcome.
check() {
  local name="$1" seconds="$2"
  shift 2
  local now left rc t0
  now=$(date +%s)
  left=$((budget_s - (now - started)))
  if [ "$left" -lt 10 ]; then
    say "NOT RUN $name: the ${budget_s} s budget is spent"
    return 0
  fi
  [ "$seconds" -gt "$left" ] && seconds=$left
  t0=$now
  set +e
  timeout --kill-after=5 "$seconds" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  set -e
  now=$(date +%s)
  if [ $rc -eq 0 ]; then
    say "PASS $name ($((now - t0)) s)"
  else
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      say "FAIL $name: timed out after $seconds s"
    else
      say "FAIL $name (exit $rc, $((now - t0)) s)"
    fi
    tail -n 15 "$logs/$name.log" | sed 's/^/    /' | tee -a "$report"
    failed=1
    failed_checks="$failed_checks $name"
  fi
  return 0
}

show() {  # show NAME PATTERN: copies the matching lines of a check's log into the report
  grep -E "$2" "$logs/$1.log" 2>/dev/null | sed 's/^/    /' | tee -a "$report" || true
}

# junit_run NAME [JVM OPTIONS…] -- SELECTORS…: the JUnit console on the bundle's class path, with its XML reports
# (open test reporting, which names every test by its unique id) in $logs/NAME-reports. Fails when a test failed,
# and when no test ran: the console exits 0 when every class only skipped (a GPU test without a GPU, a class whose
# @BeforeAll assumption failed), which would report PASS for a step that proved nothing.
junit_run() {
  local name="$1"
  shift
  local jvm=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    jvm+=("$1")
    shift
  done
  shift
  local rc
  set +e
  "$java" -Djunit.jupiter.execution.timeout.default=60s "${jvm[@]}" \
    -jar "$bundle/junit-platform-console-standalone.jar" execute --class-path "$cp" --details=summary \
    --disable-banner --reports-dir "$logs/$name-reports" --config=junit.platform.reporting.open.xml.enabled=true "$@"
  rc=$?
  set -e
  local ran
  ran="$(sed -n 's/^\[ *\([0-9][0-9]*\) tests successful *\]$/\1/p' "$logs/$name.log" 2>/dev/null | tail -n 1)"
  if [ "$rc" -eq 0 ] && [ "${ran:-0}" -eq 0 ]; then
    echo "gpu-check: $name ran no test (every test skipped, or none found): nothing was proven"
    return 5
  fi
  return "$rc"
}

# first_failed NAME: the unique id of the first test that failed in JUnit step NAME (empty when none).
first_failed() {
  python3 - "$logs/$1-reports" <<'PY' 2>/dev/null || true
import glob, sys
import xml.etree.ElementTree as ET
for f in sorted(glob.glob(sys.argv[1] + "/*.xml")):
    try:
        root = ET.parse(f).getroot()
    except ET.ParseError:
        continue
    if not root.tag.endswith("events"):
        continue
    ids, failed = {}, []
    for e in root:
        tag = e.tag.split("}")[-1]
        if tag == "started":
            for m in e.iter():
                if m.tag.endswith("uniqueId"):
                    ids[e.get("id")] = m.text
        elif tag == "finished":
            for r in e.iter():
                if r.tag.endswith("result") and r.get("status") in ("FAILED", "ERRORED"):
                    failed.append(e.get("id"))
    for i in failed:
        uid = ids.get(i, "")
        # A test, not a class or factory that failed because one of its children did.
        if uid and ("[method:" in uid or "[dynamic-test:" in uid or "[test-template-invocation:" in uid):
            print(uid)
            raise SystemExit(0)
PY
}

# rerun_first_failure STEP [JVM OPTIONS…]: the first failed test of STEP again, alone, with NCCL's own account of
# init and environment (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV), then with NCCL_CUMEM_ENABLE=0 (cuMem memory off,
# a frequent difference between sandboxes and bare metal).
rerun_first_failure() {
  local step="$1"
  shift
  local uid
  uid="$(first_failed "$step")"
  if [ -z "$uid" ]; then
    say "    (no failed test found in the reports of $step to run again)"
    return 0
  fi
  say "    running again alone: $uid"
  check "$step-rerun-debug" 90 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
    bash -c 'junit_run "$@"' _ "$step-rerun-debug" "$@" -- --select-unique-id "$uid"
  show "$step-rerun-debug" 'NCCL INFO .*(NCCL version|cudaDriverVersion|Bootstrap|comm 0x|NCCL_)|tests (successful|failed)'
  check "$step-rerun-cumem0" 90 env NCCL_CUMEM_ENABLE=0 \
    bash -c 'junit_run "$@"' _ "$step-rerun-cumem0" "$@" -- --select-unique-id "$uid"
  show "$step-rerun-cumem0" 'tests (successful|failed)'
}

# Each check's function runs in a subshell of `timeout`: export what they use.
export -f junit_run
start_steps() {  # start_steps OUT: the report, the logs, the clock
  out="$1"
  mkdir -p "$out"
  report="$out/gpu-report.txt"
  : > "$report"
  logs="$(mktemp -d)"
  failed=0
  failed_checks=""
  started=$(date +%s)
  export java cp bundle logs
}

finish() {  # finish EXIT_CODE: packs the logs (the second and last file that comes back)
  tar -czf "$out/gpu-logs.tar.gz" -C "$logs" . 2>/dev/null || true
  rm -rf "$logs"
  exit "$1"
}

# ====================================================================== run (the GPU machine)

run() {
  start_steps "${OUT:-$root/target/gpu-report}"
  say "nccl4j GPU check, $(date -u +%FT%TZ)"
  if [ ! -f "$bundle/jre/bin/java" ]; then
    say "FAIL: $bundle is missing; run 'ci/gpu-check.sh prepare' on a build machine and carry target/gpu-bundle"
    finish 2
  fi
  bundle_env
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$logs/nvidia-smi.log" 2>&1; then
    say "FAIL: no NVIDIA GPU here (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists no GPU' \
      || echo 'not found')); these checks need one"
    finish 3
  fi

  # ------------------------------------------------------------------ versions first
  export NCCL_DEBUG=WARN
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null \
    | sed 's/^/GPU: /' | tee -a "$report" || true
  say "CUDA (driver): $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
  say "nvcc: $(nvcc --version 2>/dev/null | tail -n 1 || echo 'not found')"
  say "python: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>/dev/null \
    || echo 'no torch')"
  local wheel
  for wheel in nvidia-nccl-cu13 nvidia-nccl-cu12; do
    say "pip $wheel: $(python3 -m pip show "$wheel" 2>/dev/null | sed -n 's/^Version: //p' | head -n 1 | grep . \
      || echo 'not installed')"
  done
  # One libnccl file for Java, the C probe and the PyTorch rank: the one torch itself has mapped.
  local nccl_lib
  nccl_lib="$(python3 "$root/samples/python/weights_from_pytorch.py" --print-nccl-path 2>>"$logs/nccl-path.log" || true)"
  if [ -n "$nccl_lib" ]; then
    say "libnccl: $nccl_lib (the file torch has mapped)"
  else
    # No torch with NCCL: a pip wheel's, else the system's, else whatever NCCL4J_NCCL_PATH already names.
    nccl_lib="$(python3 -c 'import glob, site, sys
for r in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    for p in glob.glob(r + "/nvidia/*/lib/libnccl.so.2"):
        print(p); raise SystemExit' 2>/dev/null || true)"
    [ -n "$nccl_lib" ] || nccl_lib="$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2 .*x86-64/ {print $NF; exit}')"
    [ -n "$nccl_lib" ] || nccl_lib="${NCCL4J_NCCL_PATH:-}"
    say "libnccl: ${nccl_lib:-not found} (torch has none mapped: $(tail -n 1 "$logs/nccl-path.log" 2>/dev/null))"
  fi
  if [ -n "$nccl_lib" ]; then
    export NCCL4J_NCCL_PATH="$nccl_lib"
  fi
  say "CUDA runtime (Java and C probe): ${cudart:-missing}"

  # ------------------------------------------------------------------ checks
  check torch-baseline 40 python3 "$root/ci/torch_nccl_baseline.py" 29512
  show torch-baseline '^baseline:'
  if grep -q 'baseline: PASS' "$logs/torch-baseline.log" 2>/dev/null; then
    say "    => NCCL works on this machine: a failure below is nccl4j's"
  else
    say "    => PyTorch's own NCCL all-reduce did not pass here: NCCL may not work in this sandbox, and"
    say "       failures below need not be nccl4j's"
  fi
  check info 30 "${cli[@]}" info
  show info '^(CUDA|NCCL|GPUs|NVTX|mapped)'
  local version multi=0
  version="$(sed -n 's/^NCCL: NCCL \([0-9]*\.[0-9]*\)\.[0-9]*.*/\1/p' "$logs/info.log" | head -n 1)"
  if grep -qE '^NCCL: NCCL 2\.(3[0-9]|[4-9][0-9])' "$logs/info.log"; then
    multi=1
  fi

  local selectors=()
  for c in "${gpu_classes[@]}"; do
    selectors+=(--select-class "$c")
  done
  check gpu-tests-ws1 150 env NCCL4J_GPU_WORLD_SIZES=1 bash -c 'junit_run gpu-tests-ws1 -- "$@"' _ "${selectors[@]}"
  show gpu-tests-ws1 'tests (successful|failed|skipped|found)|NcclGpuTest:|NcclConformanceTest|ran no test'

  check probe-java 45 "${cli[@]}" probe --backend nccl --world-size 1 --timeout 60 --latency 2000 \
    --trace "$logs/probe-trace.json"
  check probe-native 45 "$bundle/nccl_probe" --latency 2000
  show probe-java '^(direct|decomposed|counted|API-call|endpoint|latency)'
  show probe-native '^(direct|decomposed|counted|endpoint|latency)'
  local lj ln
  lj="$(sed -n 's/^latency: \([0-9.]*\) us.*/\1/p' "$logs/probe-java.log" 2>/dev/null | head -n 1)"
  ln="$(sed -n 's/^latency: \([0-9.]*\) us.*/\1/p' "$logs/probe-native.log" 2>/dev/null | head -n 1)"
  # A checked target: Java's blocking 1 KiB all-reduce within 1.10x of the same loop in C (one sample each, on one
  # machine, one after the other).
  if [ -n "$lj" ] && [ -n "$ln" ]; then
    local ratio
    ratio="$(awk -v a="$lj" -v b="$ln" 'BEGIN { printf "%.2f", a / b }')"
    if awk -v r="$ratio" 'BEGIN { exit !(r <= 1.10) }'; then
      say "PASS latency-ratio: 1 KiB AllReduce Java $lj us, C $ln us, ratio $ratio (target <= 1.10)"
    else
      say "FAIL latency-ratio: 1 KiB AllReduce Java $lj us, C $ln us, ratio $ratio (target <= 1.10)"
      failed=1
      failed_checks="$failed_checks latency-ratio"
    fi
  else
    say "FAIL latency-ratio: a probe printed no latency (Java '${lj:-none}', C '${ln:-none}')"
    failed=1
    failed_checks="$failed_checks latency-ratio"
  fi

  if [ $multi -eq 1 ]; then
    # Two ranks on one GPU run as processes (NCCL does not support threads of one process driving ranks of one
    # communicator on one GPU); NCCL >= 2.30 allows two per GPU with NCCL_MULTI_RANK_GPU_ENABLE=1.
    local two=(env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8)
    check contracts-ws2-processes 60 "${two[@]}" "${cli[@]}" run --nproc-per-node 2 -- contracts --backend nccl \
      --timeout 60
    show contracts-ws2-processes 'passed, .* failed'
    check equivalence-ws2-processes 60 "${two[@]}" "${cli[@]}" run --nproc-per-node 2 -- equivalence --backend nccl \
      --timeout 60
    # nccl4j's NCCL backend under PyTorch's own launcher (its agent hosts the store).
    check torchrun-nccl-ws2 60 "${two[@]}" python3 -m torch.distributed.run --nproc-per-node 2 --no-python \
      "${cli[@]}" contracts --backend nccl --timeout 60
    show torchrun-nccl-ws2 'passed, .* failed'
    # A PyTorch rank and a Java rank in one communicator (the id under nccl_unique_id in torch's TCPStore).
    check mixed-group 70 "${two[@]}" bash "$root/ci/mixed-group.sh" 29531 "${cli[@]}"
    show mixed-group '(^weights|^python: weights|^mixed-group)'
  else
    say "world size 2 on one GPU: not testable with NCCL ${version:-(not loaded)} (two ranks on one GPU need NCCL >= 2.30"
    say "     with NCCL_MULTI_RANK_GPU_ENABLE=1; older NCCL rejects them: \"Duplicate GPU detected\")"
  fi

  # Kernels in an NVTX range, counted by a profiler (nsys is not on this machine; ncu is). At one rank NCCL launches
  # no kernel for SUM, AllGather or ReduceScatter (a copy); AVG on float32 is its one-rank PreMulSum kernel.
  if command -v ncu >/dev/null 2>&1; then
    check ncu-avg 60 ncu --nvtx --nvtx-include "direct/" --csv --metrics gpu__time_duration.sum \
      "$bundle/nccl_probe" --op avg --size 1048576 --warmups 1 --iterations 3
    local kernels
    kernels="$(grep -c '"gpu__time_duration.sum"' "$logs/ncu-avg.log" 2>/dev/null || true)"
    if grep -qiE 'LibraryNotLoaded|ERR_NVGPUCTRPERM|could not|not supported' "$logs/ncu-avg.log" 2>/dev/null; then
      say "NOT CHECKED kernel-count: ncu could not read counters here ($(grep -oiE 'LibraryNotLoaded|ERR_NVGPUCTRPERM' \
        "$logs/ncu-avg.log" | head -n 1)); reported, not checked"
    elif [ "${kernels:-0}" = 3 ]; then
      say "PASS kernel-count: ncu counted 3 kernels in the NVTX range 'direct' (3 AllReduce AVG at one rank, one"
      say "    PreMulSum kernel each)"
    else
      say "FAIL kernel-count: ncu counted ${kernels:-0} kernels in the NVTX range 'direct', expected 3 (3 AllReduce AVG"
      say "    at one rank, one PreMulSum kernel each)"
      failed=1
      failed_checks="$failed_checks kernel-count"
    fi
  else
    say "NOT RUN kernel counts: ncu not found (the probes count API calls, not kernels)"
  fi

  if echo "$failed_checks" | grep -q 'gpu-tests-ws1'; then
    rerun_first_failure gpu-tests-ws1
  fi
  say "result: $([ $failed -eq 0 ] && echo 'all checks passed' || echo "SOME CHECKS FAILED:$failed_checks")"
  say "total $(( $(date +%s) - started )) s; logs in gpu-logs.tar.gz"
  finish $failed
}

# ====================================================================== selftest (a machine without GPU)

# loaded_report: from the class-load logs of the self-test's JVMs, the modules and carried jars a class was loaded
# from, and what the bundle carries that no step loaded (candidates to leave out). Sets $outside to the sources of
# classes that came from outside the bundle.
loaded_report() {
  local sources
  sources="$(cat "$logs"/classes/*.log 2>/dev/null | sed -n 's/.* source: //p' | sed 's#!/.*##' | sort -u)"
  say "loaded from: modules $(echo "$sources" | sed -n 's#^jrt:/\([a-z.]*\).*#\1#p' | sort -u | paste -sd' ' -)"
  say "             jars $(echo "$sources" | sed -n "s#^\(jar:\)\{0,1\}file:$bundle/##p" | sort -u | paste -sd' ' -)"
  local never=""
  for j in "$bundle"/jars/*.jar "$bundle"/junit-platform-console-standalone.jar; do
    case "$j" in
      *-linux-x86_64.jar) continue ;; # JNI libraries, which JavaCPP extracts: no class comes from it
    esac
    echo "$sources" | grep -q "$(basename "$j")" || never="$never $(basename "$j")"
  done
  say "carried, never loaded here:${never:- nothing}"
  outside="$(echo "$sources" | grep -E '^(jar:)?file:' | grep -vF "file:$bundle/" | head -n 5 || true)"
  [ -z "$outside" ] || say "     from outside the bundle: $(echo "$outside" | paste -sd' ' -)"
}

selftest() {
  local t0 fixture stub cuda_version
  t0=$(date +%s)
  NCCL4J_GPU_PREPARE_REUSE="${NCCL4J_GPU_PREPARE_REUSE:-1}" prepare
  local prepared=$(( $(date +%s) - t0 ))
  cuda_version="$(sed -n 's:.*<cuda.presets.version>\(.*\)</cuda.presets.version>.*:\1:p' "$root/pom.xml" | head -n 1)"
  # The native tests' fixture: Debian's libnccl.so.2 (with the C23 shim an older glibc needs) and a driver stub.
  fixture="$root/target/native/nccl"
  stub="$root/target/native/libcuda.so.1"
  if [ ! -f "$fixture/libnccl.so.2" ] || [ ! -f "$fixture/libnccl4j_isoc23.so" ]; then
    bash "$root/native/fixtures/nccl/fetch.sh" "$fixture" >&2
  fi
  if [ ! -f "$stub" ]; then
    bash "$root/native/fixtures/cuda-stub/build.sh" \
      "$HOME/.m2/repository/org/bytedeco/cuda/$cuda_version/cuda-$cuda_version-linux-x86_64.jar" "$root/target/native" >&2
  fi
  start_steps "$root/target/gpu-selftest"
  say "nccl4j GPU check, self-test on a machine without GPU, $(date -u +%FT%TZ) (prepared in $prepared s)"
  bundle_env
  # Every JVM the steps start (the CLI, JUnit, the launcher's ranks) logs the classes it loads and where from: what
  # the bundle is held to (see loaded_report at the end).
  mkdir -p "$logs/classes"
  export JDK_JAVA_OPTIONS="-Xlog:class+load=info:file=$logs/classes/jvm-%p.log"
  # The stub stands where the driver would: on the library path (for the C probe's CUDA runtime), and named to Java.
  export NCCL4J_NCCL_PATH="$fixture/libnccl.so.2" NCCL4J_CUDA_DRIVER_PATH="$stub" \
    LD_PRELOAD="$fixture/libnccl4j_isoc23.so" LD_LIBRARY_PATH="$(dirname "$stub")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local nccl_version
  nccl_version="$(sed -n 's/^version=//p' "$fixture/fixture.properties")"
  say "(steps run as on the GPU machine, PASS and FAIL theirs; ok and BAD say whether that is what a machine without"
  say " a GPU must give)"
  local wrong=0
  expect() {  # expect WHAT CONDITION…: records whether the bundle behaved as the GPU machine needs
    local what="$1"
    shift
    if "$@"; then
      say "ok   $what"
    else
      say "BAD  $what"
      wrong=1
    fi
  }
  in_log() { grep -qE -- "$2" "$logs/$1.log"; }

  # The runtime has every module the carried jars need: jdeps asked again here, over the jars as carried, against the
  # modules the runtime reports — whatever list prepare gave jlink.
  local need have missing
  need="$(jre_modules "$bundle"/jars/*.jar "$bundle/junit-platform-console-standalone.jar")"
  have="$("$java" --list-modules | sed 's/@.*//' | sort)"
  missing="$(echo "$need" | tr ',' '\n' | sort | comm -23 - <(echo "$have"))"
  expect "the Java runtime has the modules jdeps finds in the jars ($need)" test -z "$missing"
  [ -z "$missing" ] || say "     missing: $(echo "$missing" | paste -sd, -)"

  # The library path the C probe gets is a file it can dlopen, and the NCCL it names loads.
  check probe 20 "$bundle/nccl_probe" --iterations 1 --warmups 0
  expect "the C probe loads NCCL4J_CUDART_PATH ($NCCL4J_CUDART_PATH) and NCCL4J_NCCL_PATH, then finds no GPU" \
    in_log probe "^nccl_probe: no CUDA device: CUDA driver is a stub library \(NCCL $nccl_version loaded\)$"

  # The JNI binding loads the real libnccl against the driver stub, from the bundle's runtime and jars. info's exit
  # code is the GPU run's "PASS info": 0 only where the driver, the runtime, NCCL and a GPU are all usable.
  local rc_info
  set +e
  timeout 30 "${cli[@]}" info >"$logs/info.log" 2>&1
  rc_info=$?
  set -e
  expect "info: NCCL $nccl_version through the binding" in_log info "^NCCL: NCCL $nccl_version, "
  expect "info: the driver is the stub" in_log info '^CUDA driver: .*is a stub'
  expect "info: the libnccl mapped is $NCCL4J_NCCL_PATH" in_log info "^mapped: libnccl $NCCL4J_NCCL_PATH;"
  expect "info: the CUDA runtime mapped includes the bundle's" in_log info "^mapped: .*libcudart .*$cudart"
  expect "info exits 2 without a usable driver and GPU (got $rc_info), naming them" test "$rc_info" = 2 -a \
    -n "$(grep -E '^NCCL backend: not usable here \(CUDA driver, GPUs;' "$logs/info.log")"
  show info '^(CUDA|NCCL|mapped|GPUs)'
  # And the GPU run's info fails where NCCL cannot be loaded, naming NCCL.
  set +e
  NCCL4J_NCCL_PATH=/nonexistent/libnccl.so.2 timeout 30 "${cli[@]}" info >"$logs/info-without-nccl.log" 2>&1
  rc_info=$?
  set -e
  expect "info exits 2 where it cannot load NCCL (got $rc_info), naming NCCL" test "$rc_info" = 2 -a \
    -n "$(grep -E '^NCCL backend: not usable here \(.*NCCL' "$logs/info-without-nccl.log")"
  local fixture_props=(-Dnccl4j.native.fixture="$fixture/fixture.properties" -Dnccl4j.nccl.path="$NCCL4J_NCCL_PATH"
    -Dnccl4j.cuda.driver.path="$stub" -Dnccl4j.cudart.path="$cudart")
  check native-tests 60 bash -c 'junit_run native-tests "$@"' _ "${fixture_props[@]}" -- \
    --select-class io.nccl4j.nccl.NativeNcclTest
  show native-tests 'tests (successful|failed|skipped)'
  expect "the binding's native tests ran and passed in the bundle" test "$(echo "$failed_checks" | grep -c native-tests)" = 0

  # A step that runs nothing fails: the gpu tests skip here, as they would on a GPU machine whose NCCL did not load.
  local selectors=()
  for c in "${gpu_classes[@]}"; do
    selectors+=(--select-class "$c")
  done
  local before="$failed_checks"
  check gpu-tests-ws1 60 bash -c 'junit_run gpu-tests-ws1 -- "$@"' _ "${selectors[@]}"
  expect "a JUnit step that ran no test fails (the gpu tests skip without a GPU)" in_log gpu-tests-ws1 'ran no test'
  # A failed test is found and run again alone, as after a failed gpu step (here: one made to fail by a wrong
  # binding version).
  check failing-step 60 bash -c 'junit_run failing-step "$@"' _ "${fixture_props[@]}" -Dnccl4j.bound.nccl=0.0.1 -- \
    --select-method io.nccl4j.nccl.NativeNcclTest#versionIsTheFixturesAndTheBindingIsTheDefaultLines
  rerun_first_failure failing-step "${fixture_props[@]}" -Dnccl4j.bound.nccl=0.0.1
  expect "the first failed test is run again alone (one test found)" in_log failing-step-rerun-debug \
    '^\[ +1 tests found +\]$'
  failed_checks="$before"
  failed=0

  # The CPU parts, as the GPU machine runs them: the launcher starts processes from the bundle's runtime, they meet
  # at the TCP store and run the contracts.
  check contracts-processes 90 "${cli[@]}" run --nproc-per-node 2 -- contracts --backend cpu --timeout 60
  expect "the launcher, the store and the contracts run on the bundle (2 processes)" \
    in_log contracts-processes 'passed, 0 failed'
  show contracts-processes 'passed, .* failed'

  # And `run` itself stops at the GPU check here, with its report.
  set +e
  OUT="$logs/run" bash "$root/ci/gpu-check.sh" run >"$logs/run.log" 2>&1
  local rc=$?
  set -e
  expect "ci/gpu-check.sh run exits 3 without a GPU (got $rc)" test "$rc" = 3

  loaded_report
  expect "every class the steps loaded came from the bundle" test -z "$outside"
  expect "$bundle_size_line" test "$(du -sb "$bundle" | cut -f1)" -le $((bundle_budget_mib * 1048576))

  say "self-test: $([ $wrong -eq 0 ] && echo 'the bundle behaves as the GPU machine needs' || echo 'FAILED') in" \
    "$(( $(date +%s) - t0 )) s"
  finish $wrong
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  selftest) selftest ;;
  *) echo "usage: ci/gpu-check.sh prepare|run|selftest" >&2; exit 2 ;;
esac
