#!/usr/bin/env bash
# Builds nccl4j's native pieces that need only gcc: the native twin of the probe (native/probe) and
# the NVTX recording injection library used by tests (native/nvtx-injection).
# usage: native/build.sh <output dir>. Without gcc nothing is built and the tests that need it skip.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
command -v gcc >/dev/null || { echo "native/build.sh: gcc not found; native pieces not built" >&2; exit 0; }
mkdir -p "$out"
gcc -O2 -Wall -Wextra -o "$out/nccl_probe" "$here/probe/nccl_probe.c" -ldl
bash "$here/nvtx-injection/build.sh" "$out"
echo "built $out/nccl_probe"
