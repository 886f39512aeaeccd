#!/usr/bin/env bash
# A Spark standalone cluster on this machine (127.0.0.1) from the jars Maven resolved for spark/, without a Spark
# distribution: a Master and N Workers, each a JVM started with the command Spark's own launcher builds for it
# (org.apache.spark.launcher.Main, as a distribution's bin/spark-class runs it, on a SPARK_HOME whose jars/ holds
# Spark's jars); then spark-submit of a sample — by default GradientAveraging, whose barrier stage all-reduces across
# the executors with nccl4j — with nccl4j in --jars, as an application ships it to a cluster; its result checked;
# everything stopped.
#
#   mvn -B -f spark/pom.xml package -DskipTests    # the jar and target/standalone/*-classpath.txt it runs from
#   spark/standalone-cluster.sh [--workers N] [--keep-work] [-- CLASS [ARGS...]]
#
# --workers N      Workers of 1 core each, one executor each (2); GradientAveraging runs N partitions.
# --keep-work      keep the work folder (logs, the executors' stdout and stderr) after a success too.
# -- CLASS ARGS    submit another class of the jar (its arguments as given); it passes when it exits 0.
#
# Exit status 0 when the job passed (GradientAveraging: exit status 0 and its PASS line, with an executor per Worker:
# each task in an executor JVM of its own), 1 when it did not or the cluster did not start (the logs' tails are
# printed, the work folder kept), 2 on a usage error. The work folder is $NCCL4J_SPARK_WORK when set, else a
# temporary one. Wall-clock limits scale with NCCL4J_TEST_TIME_FACTOR (1).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workers=2
keep=0
submit=()
while (($#)); do
  case "$1" in
    --workers) workers="${2:?--workers takes a number}"; shift 2 ;;
    --keep-work) keep=1; shift ;;
    --) shift; submit=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "standalone-cluster.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "standalone-cluster.sh: --workers must be a positive number" >&2; exit 2; }
if ((${#submit[@]} == 0)); then
  submit=(io.nccl4j.spark.sample.GradientAveraging - "$workers")   # '-': the master spark-submit gives
fi

target="$here/target"
jar="$(ls "$target"/nccl4j-spark-*.jar 2>/dev/null | grep -v -e '-sources' -e '-javadoc' | head -n 1 || true)"
if [[ -z "$jar" || ! -f "$target/standalone/cluster-classpath.txt" || ! -f "$target/standalone/application-classpath.txt" ]]; then
  echo "standalone-cluster.sh: build first: mvn -B -f spark/pom.xml package -DskipTests (the jar and" \
    "target/standalone/*-classpath.txt)" >&2
  exit 2
fi
java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
factor="${NCCL4J_TEST_TIME_FACTOR:-1}"
limit() { awk -v s="$1" -v f="$factor" 'BEGIN { printf "%d", s * f }'; }

work="${NCCL4J_SPARK_WORK:-}"
if [[ -z "$work" ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/nccl4j-standalone.XXXXXX")"
  made_work=1
else
  mkdir -p "$work"
  made_work=0
fi

# A distribution's layout, as far as Spark's launcher and workers read it: jars/ (the workers build each executor's
# class path from it) and the Scala version.
export SPARK_HOME="$work/spark-home"
mkdir -p "$SPARK_HOME/jars"
while IFS= read -r -d ':' j || [[ -n "$j" ]]; do
  j="${j%$'\n'}"
  if [[ -n "$j" ]]; then ln -sf "$j" "$SPARK_HOME/jars/"; fi
done < "$target/standalone/cluster-classpath.txt"

export SPARK_SCALA_VERSION=2.13
export SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=127.0.0.1
export SPARK_DAEMON_MEMORY="${SPARK_DAEMON_MEMORY:-512m}"
application_jars="$(tr ':' ',' < "$target/standalone/application-classpath.txt")"

started=()      # the JVMs this script started (Master, Workers), in order
job=""          # the driver (spark-submit) while it runs
executors=()    # the executor JVMs the Workers started (their children), seen before they are stopped
passed=0

# The command Spark's launcher builds for a class, into cmd (bin/spark-class's protocol: a NUL and a newline, then
# the command's words, each ended by a NUL).
spark_command() {
  local words=()
  mapfile -d '' words < <("$java" -Xmx128m -cp "$SPARK_HOME/jars/*" org.apache.spark.launcher.Main "$@")
  if ((${#words[@]} < 2)); then
    echo "standalone-cluster.sh: Spark's launcher built no command for $1" >&2
    return 1
  fi
  cmd=("${words[@]:1}")
  cmd[0]="${cmd[0]#$'\n'}"
}

# Waits until `grep -c PATTERN FILE` reaches COUNT, up to SECONDS, while the JVMs this script started run.
await_lines() {
  local file="$1" pattern="$2" count="$3" seconds="$4" end=$((SECONDS + $4)) pid
  until (( $(grep -c -e "$pattern" "$file" 2>/dev/null || true) >= count )); do
    for pid in "${started[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "standalone-cluster.sh: JVM $pid ended while waiting for '$pattern' in $file" >&2
        return 1
      fi
    done
    if ((SECONDS >= end)); then
      echo "standalone-cluster.sh: no '$pattern' ($count) in $file within $seconds s" >&2
      return 1
    fi
    sleep 0.5
  done
}

stop_all() {
  local status="$1"
  trap - EXIT
  t_stop=$SECONDS
  local pid child
  if [[ -n "$job" ]]; then   # the driver, when this script was stopped while it ran
    kill -TERM "$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
  fi
  for pid in "${started[@]}"; do
    for child in $(pgrep -P "$pid" 2>/dev/null || true); do
      executors+=("$child")
    done
  done
  # Workers first (each stops its executors), then the Master.
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    kill -TERM "${started[$i]}" 2>/dev/null || true
  done
  local end=$((SECONDS + $(limit 30)))
  for pid in "${started[@]}" "${executors[@]}"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < end)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "standalone-cluster.sh: JVM $pid still running after SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      passed=0
    fi
  done
  echo "==> stopped: Master, ${workers} Workers, ${#executors[@]} executor JVMs ($((SECONDS - t_stop)) s)"
  if ((passed)) && ((status == 0)); then
    if ((made_work)) && ((keep == 0)); then rm -rf "$work"; else echo "logs: $work"; fi
    exit 0
  fi
  for log in "$work"/master.log "$work"/worker-*.log "$work"/job.log; do
    [[ -f "$log" ]] && { echo "--- tail of $log"; tail -n 40 "$log"; }
  done
  echo "standalone-cluster.sh: FAILED; logs (the executors' under worker-*/): $work" >&2
  exit 1
}
t_stop=$SECONDS
trap 'stop_all $?' EXIT
trap 'exit 1' INT TERM

t0=$SECONDS
echo "==> Spark standalone on 127.0.0.1: a Master and $workers Workers ($work)"
spark_command org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 0 --webui-port 0
"${cmd[@]}" > "$work/master.log" 2>&1 &
started+=($!)
await_lines "$work/master.log" "Starting Spark master at spark://" 1 "$(limit 120)"
master="$(grep -o -m 1 'spark://[^ ]*' "$work/master.log")"
for ((w = 1; w <= workers; w++)); do
  spark_command org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --port 0 --webui-port 0 --cores 1 \
    --memory 1g --work-dir "$work/worker-$w" "$master"
  "${cmd[@]}" > "$work/worker-$w.log" 2>&1 &
  started+=($!)
done
await_lines "$work/master.log" "Registering worker " "$workers" "$(limit 120)"
echo "==> $master with $workers Workers of 1 core ($((SECONDS - t0)) s)"

t1=$SECONDS
echo "==> spark-submit --class ${submit[0]} $(basename "$jar") ${submit[*]:1}"
spark_command org.apache.spark.deploy.SparkSubmit --master "$master" --deploy-mode client \
  --class "${submit[0]}" --jars "$application_jars" --driver-memory 512m --conf spark.executor.memory=512m \
  --conf spark.driver.host=127.0.0.1 "$jar" "${submit[@]:1}"
rc=0
# In the background, so that a signal to this script is handled at once (bash runs a trap after its foreground
# command ends, and waits for it).
timeout "$(limit 300)" "${cmd[@]}" > "$work/job.out" 2> "$work/job.log" &
job=$!
wait "$job" || rc=$?
job=
cat "$work/job.out"
ran="$(find "$work" -path '*/worker-*/app-*/*' -name stderr | wc -l)"
echo "==> the job exited $rc ($((SECONDS - t1)) s); executors the Workers started for it: $ran"
if ((rc == 0)) && { [[ "${submit[0]}" != io.nccl4j.spark.sample.GradientAveraging ]] \
    || { grep -q ': PASS$' "$work/job.out" && ((ran == workers)); }; }; then
  passed=1
  echo "==> PASS"
fi
