#!/usr/bin/env bash
# Builds the NVTX recording injection library used by the NVTX tests (gcc only; no CUDA headers).
# usage: build.sh <output dir>. Without gcc it builds nothing and the tests that need it skip.
set -euo pipefail
out="$1"
command -v gcc >/dev/null || { echo "nvtx-injection: gcc not found; NVTX injection tests will skip" >&2; exit 0; }
mkdir -p "$out"
gcc -shared -fPIC -O1 -o "$out/libnvtx_record.so" "$(dirname "$0")/nvtx_record.c"
echo "built $out/libnvtx_record.so"
