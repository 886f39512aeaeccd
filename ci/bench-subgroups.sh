#!/usr/bin/env bash
# Subgroups leave nothing (docs/RENDEZVOUS.md, "What a group leaves"): processes of one host make and close
# subgroups in a loop — each one all-reduce through shared memory, every element checked — and rank 0 prints, after
# the first and every EVERY subgroups, /dev/shm's used bytes, the resident bytes of the job's segments, the ranks'
# resident memory and the keys in the job's store (`nccl4j subgroups`). Every figure should stay where the first
# interval left it; before groups freed what they hold, each subgroup of two ranks kept about 280 KiB of /dev/shm
# and 7 store keys for the life of the job.
#
# As root (with unshare), the job runs in a mount namespace of its own over a tmpfs of SHM_MIB (default 4096) as its
# /dev/shm, so that the used bytes printed are the job's alone; otherwise in the host's /dev/shm, whose used bytes
# then count every other user's files too (the segments' resident bytes are the job's either way). The ranks' heaps
# are fixed and touched up front (-Xms = -Xmx, AlwaysPreTouch), so that their resident memory shows what the job
# holds rather than a heap growing towards its limit.
#
# Usage: ci/bench-subgroups.sh [COUNT] [EVERY] [PROCESSES]     (default: 10000 1000 2)
# NCCL4J_CLI overrides how nccl4j is started (default: ./nccl4j from the checkout). Prints the command's output;
# nothing is written elsewhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count="${1:-10000}"
every="${2:-1000}"
procs="${3:-2}"
read -r -a cli <<< "${NCCL4J_CLI:-$root/nccl4j}"
"${cli[@]}" --version >/dev/null # builds on first use, outside the run
export NCCL4J_JAVA_OPTS="${NCCL4J_JAVA_OPTS:--Xms256m -Xmx256m -XX:+AlwaysPreTouch -XX:+UseSerialGC}"
run=("${cli[@]}" run --nproc-per-node "$procs" -- subgroups --backend cpu --count "$count" --every "$every")
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  echo "/dev/shm: a tmpfs of ${SHM_MIB:-4096} MiB of this job's own (a mount namespace)"
  exec unshare -m sh -c 'mount -t tmpfs -o size="$0"m tmpfs /dev/shm && exec "$@"' "${SHM_MIB:-4096}" "${run[@]}"
fi
echo "/dev/shm: the host's (not root: its used bytes count other users' files too)"
exec "${run[@]}"
