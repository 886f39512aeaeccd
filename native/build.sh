#!/usr/bin/env bash
# Builds what of native/ the normal build compiles with gcc alone, neither of it shipped in the jar (native/README.md):
# the native twin of the probe (native/tools/probe) and the NVTX recording injection library the tests use
# (native/fixtures/nvtx-injection).
# usage: native/build.sh <output dir>. Without gcc nothing is built and the tests that need it skip.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
command -v gcc >/dev/null || { echo "native/build.sh: gcc not found; native pieces not built" >&2; exit 0; }
mkdir -p "$out"
gcc -O2 -Wall -Wextra -o "$out/nccl_probe" "$here/tools/probe/nccl_probe.c" -ldl
bash "$here/fixtures/nvtx-injection/build.sh" "$out"
echo "built $out/nccl_probe"
