#!/usr/bin/env bash
# nccl4j's GPU checks, in two steps, because the GPU machine has no Java and no network:
#
#   ci/gpu-check.sh prepare   on a build machine (JDK 17, Maven, Maven Central): builds
#                             target/gpu-bundle (<= 56 MiB, so that the project tree and the bundle
#                             fit the 64 MiB a device run carries): a jlink'd Java runtime, the jars,
#                             the test classes, the JUnit console launcher, the C probe, and the CUDA
#                             runtime of the binding line (from bytedeco's cuda-redist jar).
#   ci/gpu-check.sh run       on the GPU machine, from the repository root with target/gpu-bundle
#                             (carry it). Writes two files into $OUT (or target/gpu-report):
#                             gpu-report.txt and gpu-logs.tar.gz. Exits 0 when every check passed,
#                             1 when one failed, 2 without a bundle, 3 without a GPU.
#
# Run: versions first; then checks, most valuable first, each under its own `timeout` and a total
# budget of 330 s (a check that would start past it is reported as skipped): PyTorch's own NCCL
# all-reduce (tells "NCCL does not work in this sandbox" apart from "nccl4j is broken"), info, the
# gpu-tagged tests at world size 1, the Java and C probes side by side with their 1 KiB latency, the
# gpu tests at world size 2 on one GPU (two ranks as threads, NCCL >= 2.30), the contracts with two
# ranks on one GPU as processes, the equivalence at world size 2, the contracts under torchrun, a PyTorch rank and a
# Java rank in one group (ci/mixed-group.sh), kernel counts per NVTX range by
# ncu where it can read counters, the CPU backend's processes on a machine with cores to spare
# (ci/bench-processes.sh), and a rerun of failed tests with NCCL_COMM_BLOCKING=1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$root/target/gpu-bundle"
limit_mib=56
budget_s="${NCCL4J_GPU_BUDGET_S:-330}"

prepare() {
  cd "$root"
  local cuda_version junit_version redist
  cuda_version="$(sed -n 's:.*<cuda.presets.version>\(.*\)</cuda.presets.version>.*:\1:p' pom.xml | head -n 1)"
  junit_version="1.14.1"
  echo "gpu-check: building nccl4j (tests compiled, not run)" >&2
  mvn -q -B -DskipNativeTests -DskipTests package
  mvn -q -B -DskipNativeTests dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$root/target/test-classpath.txt"
  mvn -q -B dependency:copy -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_version" \
    -DoutputDirectory="$root/target/junit-console" -Dmdep.stripVersion=true
  redist="$HOME/.m2/repository/org/bytedeco/cuda-redist/$cuda_version/cuda-redist-$cuda_version-linux-x86_64.jar"
  if [ ! -f "$redist" ]; then
    mvn -q -B dependency:get -Dartifact="org.bytedeco:cuda-redist:$cuda_version:jar:linux-x86_64" -Dtransitive=false
  fi

  rm -rf "$bundle"
  mkdir -p "$bundle/jars" "$bundle/lib"
  echo "gpu-check: jlink (java.base, java.logging, java.management, jdk.unsupported, jdk.zipfs)" >&2
  jlink --add-modules java.base,java.logging,java.management,jdk.unsupported,jdk.zipfs \
    --strip-debug --no-header-files --no-man-pages --compress=2 --output "$bundle/jre"
  cp "$root/target/nccl4j.jar" "$bundle/jars/"
  # The library jar leaves the samples (the CLI) out; the bundle runs them from target/classes.
  (cd "$root/target/classes" && jar cf "$bundle/jars/nccl4j-samples.jar" io/nccl4j/samples)
  (cd "$root/target/test-classes" && jar cf "$bundle/jars/nccl4j-tests.jar" .)
  tr ':' '\n' < "$root/target/test-classpath.txt" | while read -r j; do
    case "$j" in
      # Not needed on the GPU machine: the console launcher brings JUnit itself; ArchUnit and
      # byte-buddy (AssertJ's optional proxies) only serve tests that do not run there; pdfbox and
      # fontbox only XChart's PDF export; the cuda-redist jar is 343 MB, of which only libcudart is
      # needed (copied below).
      *redist*|*/junit-*|*/opentest4j-*|*/apiguardian-*|*/archunit*|*/byte-buddy-*|*/pdfbox-*|*/fontbox-*|*/pytorch-*|"") ;;
      # Of bytedeco's JNI libraries only the CUDA runtime's and NCCL's are loaded.
      *cuda-*-linux-x86_64.jar)
        local t
        t="$(mktemp -d)"
        (cd "$t" && unzip -q "$j" 'META-INF/*' 'org/bytedeco/cuda/linux-x86_64/libjnicudart.so' \
          'org/bytedeco/cuda/linux-x86_64/libjninccl.so' && jar cfM "$bundle/jars/$(basename "$j")" .)
        rm -rf "$t" ;;
      *) cp "$j" "$bundle/jars/" ;;
    esac
  done
  cp "$root/target/junit-console/junit-platform-console-standalone.jar" "$bundle/"
  cp "$root/target/native/nccl_probe" "$bundle/"
  unzip -q -o -j "$redist" 'org/bytedeco/cuda/linux-x86_64/libcudart.so.*' -d "$bundle/lib"
  local size
  size=$(du -sm "$bundle" | cut -f1)
  echo "gpu-check: bundle $bundle is $size MiB (limit $limit_mib)" >&2
  if [ "$size" -gt "$limit_mib" ]; then
    echo "gpu-check: bundle too large" >&2
    exit 1
  fi
}

run() {
  local out="${OUT:-$root/target/gpu-report}"
  local logs
  logs="$(mktemp -d)"
  mkdir -p "$out"
  local report="$out/gpu-report.txt"
  : > "$report"
  say() { echo "$*" | tee -a "$report"; }
  finish() {  # finish EXIT_CODE: packs the logs (the second and last file that comes back)
    tar -czf "$out/gpu-logs.tar.gz" -C "$logs" . 2>/dev/null || true
    rm -rf "$logs"
    exit "$1"
  }
  say "nccl4j GPU check, $(date -u +%FT%TZ)"
  local java="$bundle/jre/bin/java"
  if [ ! -x "$java" ]; then
    say "FAIL: $bundle is missing; run 'ci/gpu-check.sh prepare' on a build machine and carry target/gpu-bundle"
    finish 2
  fi
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
  # One libnccl.so.2 for Java and the C probe alike: the one PyTorch's pip wheel brings, else the system's.
  local nccl_lib
  nccl_lib="$(python3 - <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in roots:
    for rel in ("nvidia/nccl/lib/libnccl.so.2", "nvidia/cu13/lib/libnccl.so.2"):
        p = os.path.join(r, rel)
        if os.path.isfile(p):
            print(p)
            raise SystemExit(0)
PY
)"
  if [ -z "$nccl_lib" ]; then
    nccl_lib="$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2 .*x86-64/ {print $NF; exit}')"
  fi
  if [ -n "$nccl_lib" ]; then
    export NCCL4J_NCCL_PATH="$nccl_lib"
  fi
  export NCCL4J_CUDART_PATH="$bundle/lib"
  local cudart
  cudart="$(ls "$bundle"/lib/libcudart.so.* 2>/dev/null | head -n 1)"
  say "libnccl.so.2 (Java and C probe): ${nccl_lib:-not found}; CUDA runtime: ${cudart:-missing}"
  say "python: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>/dev/null \
    || echo 'no torch')"

  local cp
  cp="$(ls "$bundle"/jars/*.jar | tr '\n' ':')"
  local cli=("$java" -cp "$cp" io.nccl4j.samples.Cli)
  local junit=("$java" -Djunit.jupiter.execution.timeout.default=60s -jar "$bundle/junit-platform-console-standalone.jar"
    execute --class-path "$cp" --details=summary --disable-banner)
  local failed=0
  local started
  started=$(date +%s)
  local failed_checks=""

  # check NAME SECONDS COMMAND...: runs it under `timeout`, keeps its output, records the outcome.
  check() {
    local name="$1" seconds="$2"
    shift 2
    local now left rc t0
    now=$(date +%s)
    left=$((budget_s - (now - started)))
    if [ "$left" -lt 10 ]; then
      say "SKIP $name: the ${budget_s} s budget is spent"
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

  check torch-baseline 40 python3 "$root/ci/torch_nccl_baseline.py" 29512
  show torch-baseline '^baseline:'
  if grep -q 'baseline: PASS' "$logs/torch-baseline.log" 2>/dev/null; then
    say "    => NCCL works on this machine: a failure below is nccl4j's"
  else
    say "    => PyTorch's own NCCL all-reduce did not pass here: NCCL may not work in this sandbox, and"
    say "       failures below need not be nccl4j's"
  fi
  check info 30 "${cli[@]}" info
  show info '^(CUDA|NCCL|GPUs|NVTX)'
  local multi=0
  if grep -qE '^NCCL: NCCL 2\.(3[0-9]|[4-9][0-9])' "$logs/info.log"; then
    multi=1
  fi

  check gpu-tests-ws1 130 env NCCL4J_GPU_WORLD_SIZES=1 "${junit[@]}" \
    --select-class io.nccl4j.nccl.NcclGpuTest --select-class io.nccl4j.conformance.NcclConformanceTest --fail-if-no-tests
  show gpu-tests-ws1 'tests (successful|failed|skipped|found)|NcclGpuTest:|NcclConformanceTest'

  check probe-java 45 "${cli[@]}" probe --backend nccl --world-size 1 --timeout 60 --latency 2000 \
    --trace "$logs/probe-trace.json"
  check probe-native 45 "$bundle/nccl_probe" --latency 2000
  show probe-java '^(direct|decomposed|counted|API-call|endpoint|latency)'
  show probe-native '^(direct|decomposed|counted|endpoint|latency)'
  local lj ln
  lj="$(sed -n 's/^latency: \([0-9.]*\) us.*/\1/p' "$logs/probe-java.log" 2>/dev/null | head -n 1)"
  ln="$(sed -n 's/^latency: \([0-9.]*\) us.*/\1/p' "$logs/probe-native.log" 2>/dev/null | head -n 1)"
  if [ -n "$lj" ] && [ -n "$ln" ]; then
    say "    1 KiB AllReduce latency: Java $lj us, C $ln us, ratio $(awk -v a="$lj" -v b="$ln" \
      'BEGIN { printf "%.2f", a / b }') (target <= 1.10)"
  fi

  if [ $multi -eq 1 ]; then
    check gpu-tests-ws2-threads 100 env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8 NCCL4J_GPU_WORLD_SIZES=2 \
      "${junit[@]}" --select-class io.nccl4j.nccl.NcclGpuTest --select-class io.nccl4j.conformance.NcclConformanceTest
    show gpu-tests-ws2-threads 'tests (successful|failed|skipped|found)'
    check contracts-ws2-processes 60 env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8 \
      "${cli[@]}" run --nproc-per-node 2 -- contracts --backend nccl --timeout 60
    show contracts-ws2-processes 'passed, .* failed'
    check equivalence-ws2-threads 40 env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8 \
      "${cli[@]}" equivalence --backend nccl --world-size 2 --timeout 60
    # nccl4j's NCCL backend under PyTorch's own launcher (its agent hosts the store).
    check torchrun-nccl-ws2 60 env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8 python3 -m torch.distributed.run \
      --nproc-per-node 2 --no-python "${cli[@]}" contracts --backend nccl --timeout 60
    show torchrun-nccl-ws2 'passed, .* failed'
    # A PyTorch rank and a Java rank in one communicator (the id under nccl_unique_id in torch's TCPStore).
    check mixed-group 70 env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=8 bash "$root/ci/mixed-group.sh" 29531 \
      "${cli[@]}"
    show mixed-group '(^weights|^python: weights|^mixed-group)'
  else
    say "SKIP world size 2 on one GPU (threads, processes, the PyTorch + Java mixed group): NCCL < 2.30 rejects"
    say "     two ranks on one GPU"
  fi

  # Kernels per NVTX range, counted by a profiler (nsys is not on this machine; ncu is).
  if command -v ncu >/dev/null 2>&1; then
    for range in direct decomposed; do
      check "ncu-$range" 40 ncu --nvtx --nvtx-include "$range/" --csv --metrics gpu__time_duration.sum \
        "$bundle/nccl_probe" --size 1048576 --warmups 1 --iterations 3
      local kernels
      kernels="$(grep -c '"gpu__time_duration.sum"' "$logs/ncu-$range.log" 2>/dev/null || true)"
      if grep -qiE 'LibraryNotLoaded|ERR_NVGPUCTRPERM|could not|not supported' "$logs/ncu-$range.log" 2>/dev/null; then
        say "    ncu could not read counters here ($(grep -oiE 'LibraryNotLoaded|ERR_NVGPUCTRPERM' \
          "$logs/ncu-$range.log" | head -n 1)): kernels per range not counted"
      else
        say "    ncu counted ${kernels:-0} kernels in the NVTX range '$range' (3 iterations)"
      fi
    done
  else
    say "SKIP kernel counts: ncu not found (the probes count API calls, not kernels)"
  fi

  # Not the GPU: the CPU backend's processes against threads and two namespaces against their veth, on a
  # machine with cores to spare (targets 8 and 9 of docs/PERFORMANCE.md, measured on 2 cores elsewhere).
  check cpu-processes 100 env NCCL4J_CLI="${cli[*]}" bash "$root/ci/bench-processes.sh" all 2
  show cpu-processes '^(latency|hosts)'

  if [ -n "$failed_checks" ] && echo "$failed_checks" | grep -q gpu-tests-ws1; then
    check gpu-tests-ws1-comm-blocking 100 env NCCL_COMM_BLOCKING=1 NCCL4J_GPU_WORLD_SIZES=1 "${junit[@]}" \
      --select-class io.nccl4j.nccl.NcclGpuTest --select-class io.nccl4j.conformance.NcclConformanceTest
    show gpu-tests-ws1-comm-blocking 'tests (successful|failed|skipped|found)'
  fi
  say "result: $([ $failed -eq 0 ] && echo 'all checks passed' || echo "SOME CHECKS FAILED:$failed_checks")"
  say "total $(( $(date +%s) - started )) s; logs in gpu-logs.tar.gz"
  finish $failed
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: ci/gpu-check.sh prepare|run" >&2; exit 2 ;;
esac
