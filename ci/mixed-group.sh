#!/usr/bin/env bash
# A PyTorch rank and a Java rank in one NCCL group (ci/gpu-check.sh's mixed-group check):
#   ci/mixed-group.sh PORT CLI...   CLI: the command that runs nccl4j's CLI (java -cp … io.nccl4j.cli.Cli)
# Rank 0 is samples/python/weights_from_pytorch.py (torch, NCCL through ctypes; it hosts the TCPStore and creates
# the unique id); rank 1 is `CLI weights`. Both load the libnccl file torch has mapped (the Python sample prints it with
# --print-nccl-path): NCCL refuses peers of another version. Exits 0 when both ranks checked every element.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="$1"
shift
sample="$root/samples/python/weights_from_pytorch.py"
if ! nccl="$(python3 "$sample" --print-nccl-path)"; then
  echo "mixed-group: no libnccl file of torch's to share with the Java rank"
  exit 3
fi
export NCCL4J_NCCL_PATH="$nccl"
echo "mixed-group: both ranks load $nccl (the file torch mapped)"
log="$(mktemp)"
python3 "$sample" --port "$port" --world-size 2 --timeout 60 >"$log" 2>&1 &
py=$!
"$@" weights --store "127.0.0.1:$port" --rank 1 --world-size 2 --timeout 60
java_rc=$?
wait "$py"
py_rc=$?
sed 's/^/python: /' "$log"
rm -f "$log"
echo "mixed-group: python rank 0 exit $py_rc, java rank 1 exit $java_rc"
[ "$py_rc" -eq 0 ] && [ "$java_rc" -eq 0 ]
