#!/usr/bin/env bash
# nccl4j's GPU checks, in two steps because the GPU machine has no Java and no network:
#
#   ci/gpu-check.sh prepare   on a build machine (JDK 17, Maven, Maven Central):
#                             builds target/gpu-bundle (<= 64 MiB): a jlink'd Java runtime, the jars,
#                             the test classes, and libcudart.so.12 + libnvToolsExt.so.1 from the
#                             bytedeco redist (the bindings are built against CUDA 12).
#   ci/gpu-check.sh run       on the GPU machine, from the repository root with target/gpu-bundle
#                             present: finds libnccl.so.2 (system, or a pip nvidia-nccl-cu12/cu13),
#                             runs the gpu-tagged tests (the conformance suite on NCCL), the contracts
#                             and the equivalence demo on NCCL, and more ranks per GPU when NCCL >= 2.30
#                             allows it. Writes gpu-report.txt into $OUT (or target/gpu-report) and
#                             exits non-zero when a check failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$root/target/gpu-bundle"
limit_mib=64

prepare() {
  cd "$root"
  local cuda_version junit_version
  cuda_version="$(sed -n 's:.*<cuda.presets.version>\(.*\)</cuda.presets.version>.*:\1:p' pom.xml)"
  junit_version="1.14.1"
  echo "gpu-check: building nccl4j (tests compiled, not run)" >&2
  mvn -q -B -DskipNativeTests -DskipTests package
  mvn -q -B -DskipNativeTests dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$root/target/test-classpath.txt"
  mvn -q -B dependency:copy -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_version" \
    -DoutputDirectory="$root/target/junit-console" -Dmdep.stripVersion=true
  local redist="$HOME/.m2/repository/org/bytedeco/cuda/$cuda_version/cuda-$cuda_version-linux-x86_64-redist.jar"
  if [ ! -f "$redist" ]; then
    mvn -q -B dependency:get -Dartifact="org.bytedeco:cuda:$cuda_version:jar:linux-x86_64-redist"
  fi

  rm -rf "$bundle"
  mkdir -p "$bundle/jars" "$bundle/lib"
  echo "gpu-check: jlink (java.base, java.logging, java.management, jdk.unsupported, jdk.zipfs)" >&2
  jlink --add-modules java.base,java.logging,java.management,jdk.unsupported,jdk.zipfs \
    --strip-debug --no-header-files --no-man-pages --compress=2 --output "$bundle/jre"
  cp "$root/target/nccl4j.jar" "$bundle/jars/"
  (cd "$root/target/test-classes" && jar cf "$bundle/jars/nccl4j-tests.jar" .)
  tr ':' '\n' < "$root/target/test-classpath.txt" | while read -r j; do
    case "$j" in
      # Not needed on the GPU machine: the console launcher brings JUnit itself; ArchUnit and
      # byte-buddy (AssertJ's optional proxies) only serve tests that do not run there.
      *redist*|*/junit-*|*/opentest4j-*|*/apiguardian-*|*/archunit*|*/byte-buddy-*|"") ;;
      *) cp "$j" "$bundle/jars/" ;;
    esac
  done
  cp "$root/target/junit-console/junit-platform-console-standalone.jar" "$bundle/"
  cp "$root/target/native/nccl_probe" "$bundle/"
  unzip -q -o -j "$redist" 'org/bytedeco/cuda/linux-x86_64/libcudart.so.12' \
    'org/bytedeco/cuda/linux-x86_64/libnvToolsExt.so.1' -d "$bundle/lib"
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
  mkdir -p "$out"
  local report="$out/gpu-report.txt"
  local java="$bundle/jre/bin/java"
  [ -x "$java" ] || { echo "gpu-check: $bundle missing; run 'ci/gpu-check.sh prepare' first" | tee "$report"; exit 2; }
  export NCCL4J_CUDART_PATH="$bundle/lib/libcudart.so.12"
  export NCCL4J_NVTX_PATH="$bundle/lib/libnvToolsExt.so.1"
  local cp
  cp="$(ls "$bundle"/jars/*.jar | tr '\n' ':')"
  local cli=("$java" -cp "$cp" io.nccl4j.samples.Cli)
  local failed=0

  check() {  # check NAME COMMAND...: runs it, keeps its output, records PASS/FAIL
    local name="$1"; shift
    local start end rc
    start=$(date +%s)
    set +e
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    set -e
    end=$(date +%s)
    if [ $rc -eq 0 ]; then
      echo "PASS $name ($((end - start)) s)" | tee -a "$report"
    else
      echo "FAIL $name (exit $rc, $((end - start)) s): see $name.log" | tee -a "$report"
      tail -n 20 "$out/$name.log" | sed 's/^/    /' | tee -a "$report"
      failed=1
    fi
  }

  : > "$report"
  echo "nccl4j GPU check, $(date -u +%FT%TZ)" | tee -a "$report"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    | sed 's/^/GPU: /' | tee -a "$report" || true
  "${cli[@]}" info 2>&1 | tee "$out/info.log" | sed 's/^/info: /' | tee -a "$report"

  check gpu-tests "$java" -jar "$bundle/junit-platform-console-standalone.jar" execute \
    --class-path "$cp" --scan-class-path "$bundle/jars/nccl4j-tests.jar" --include-tag gpu \
    --details=summary --disable-banner --fail-if-no-tests
  grep -E "tests (successful|failed|skipped|found)" "$out/gpu-tests.log" | sed 's/^/    /' | tee -a "$report" || true
  check contracts-ws1 "${cli[@]}" contracts --backend nccl --world-size 1
  grep -E "passed, .* failed" "$out/contracts-ws1.log" | sed 's/^/    /' | tee -a "$report" || true
  check equivalence-ws1 "${cli[@]}" equivalence --backend nccl --world-size 1
  check demo "${cli[@]}" demo --backend nccl --world-size 1
  check probe-java "${cli[@]}" probe --backend nccl --world-size 1 --trace "$out/probe-trace.json"
  check probe-native "$bundle/nccl_probe"
  sed 's/^/    java:   /' "$out/probe-java.log" | grep -E "direct|decomposed|correctness" | tee -a "$report" || true
  sed 's/^/    native: /' "$out/probe-native.log" | grep -E "direct|decomposed|correctness" | tee -a "$report" || true
  check bench "${cli[@]}" bench --backend nccl --world-size 1
  check memory "${cli[@]}" memory --backend nccl --world-size 1

  local gpus
  gpus=$(grep -oE "GPUs: [0-9]+" "$out/info.log" | grep -oE "[0-9]+" || echo 0)
  if [ "${gpus:-0}" -ge 2 ]; then
    check contracts-all-gpus "${cli[@]}" contracts --backend nccl --world-size "$gpus"
  fi
  if grep -qE "NCCL 2\.(3[0-9]|[4-9][0-9])" "$out/info.log"; then
    check contracts-4-ranks-1-gpu env NCCL_MULTI_RANK_GPU_ENABLE=1 "${cli[@]}" contracts --backend nccl --world-size 4
  else
    echo "SKIP contracts-4-ranks-1-gpu: NCCL < 2.30 rejects several ranks on one GPU" | tee -a "$report"
  fi
  echo "result: $([ $failed -eq 0 ] && echo all checks passed || echo SOME CHECKS FAILED)" | tee -a "$report"
  return $failed
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: ci/gpu-check.sh prepare|run" >&2; exit 2 ;;
esac
