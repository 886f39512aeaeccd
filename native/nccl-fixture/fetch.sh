#!/usr/bin/env bash
# The real libnccl.so.2 for the native tests (tag "native"), on machines without GPU or driver.
#
# bytedeco publishes NCCL binaries on Maven Central only up to 12.6-9.5-1.5.11 (NCCL 2.23.4); the
# split cuda-redist-nccl jars of 1.5.12-1.5.14 are not there. Debian builds NCCL from NVIDIA's
# sources (package libnccl2, section contrib of sid), so the fixture takes it from deb.debian.org:
# the pinned version below, checksummed, or — once Debian has replaced it — the current one, checked
# against the SHA256 of Debian's package index. Cached in ${NCCL4J_CACHE:-~/.cache/nccl4j}.
#
# Debian's build needs glibc 2.38; on an older host (Debian 12: 2.36) the library's GLIBC_2.38
# requirement is marked weak and the few C23 functions it calls come from a preloaded shim
# (isoc23.c), see weaken_glibc.py.
#
# usage: fetch.sh <output dir> [cuda-redist jar]
# writes: libnccl.so.2, libnccl4j_isoc23.so, fixture.properties (version, origin, checksum), and
# the CUDA runtime of the binding line from bytedeco's cuda-redist jar when given (so that the tests
# use the runtime the bindings were built for, not whatever CUDA the machine has).
# Without gcc nothing is built and the native tests skip, saying why; without network it fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
redist="${2:-}"
pin_version="2.29.7-1-1"
pin_sha256="ab853a8171d4f6b995e0da18de17ac6dbea59fb8280f2d8c01d7c264a27545fa"
mirror="${NCCL4J_DEBIAN_MIRROR:-https://deb.debian.org/debian}"
cache="${NCCL4J_CACHE:-$HOME/.cache/nccl4j}"

for tool in gcc curl python3 readelf objdump tar xz unzip; do
  command -v "$tool" >/dev/null || { echo "nccl-fixture: $tool not found; no NCCL fixture, native tests will skip" >&2; exit 0; }
done
mkdir -p "$cache" "$out"
if [ -n "$redist" ] && [ -f "$redist" ]; then
  unzip -q -o -j "$redist" 'org/bytedeco/cuda/linux-x86_64/libcudart.so.*' -d "$out/cudart"
fi
if [ -f "$out/fixture.properties" ] && [ -f "$out/libnccl.so.2" ] && [ -f "$out/libnccl4j_isoc23.so" ]; then
  exit 0
fi

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# fetch URL SHA256 FILE: downloads into the cache unless a file with that checksum is there.
fetch() {
  local url="$1" sha="$2" file="$cache/$3"
  if [ -f "$file" ] && [ "$(sha_of "$file")" = "$sha" ]; then
    return 0
  fi
  curl -fsSL --retry 3 --connect-timeout 20 -o "$file.part" "$url" || { rm -f "$file.part"; return 1; }
  if [ "$(sha_of "$file.part")" != "$sha" ]; then
    echo "nccl-fixture: $url: checksum $(sha_of "$file.part"), expected $sha" >&2
    rm -f "$file.part"
    exit 1
  fi
  mv "$file.part" "$file"
}

deb="libnccl2_${pin_version}_amd64.deb"
url="$mirror/pool/contrib/n/nvidia-nccl/$deb"
sha="$pin_sha256"
if ! fetch "$url" "$sha" "$deb"; then
  echo "nccl-fixture: $url is gone; taking the libnccl2 that Debian sid has now" >&2
  index="$(curl -fsSL --retry 3 --connect-timeout 20 "$mirror/dists/sid/contrib/binary-amd64/Packages.xz" | xz -dc)" \
    || { echo "nccl-fixture: cannot read Debian's package index at $mirror (no network?)" >&2; exit 1; }
  record="$(printf '%s\n' "$index" | awk -v RS= '/(^|\n)Package: libnccl2\n/')"
  file="$(printf '%s\n' "$record" | sed -n 's/^Filename: //p')"
  sha="$(printf '%s\n' "$record" | sed -n 's/^SHA256: //p')"
  [ -n "$file" ] && [ -n "$sha" ] || { echo "nccl-fixture: Debian sid has no libnccl2 package" >&2; exit 1; }
  deb="$(basename "$file")"
  url="$mirror/$file"
  fetch "$url" "$sha" "$deb" || { echo "nccl-fixture: cannot download $url" >&2; exit 1; }
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && ar x "$cache/$deb" && tar -xf data.tar.*)
lib="$(find "$tmp" -name 'libnccl.so.2.*' -type f | head -n 1)"
[ -n "$lib" ] || { echo "nccl-fixture: $deb holds no libnccl.so.2" >&2; exit 1; }
version="${lib##*/libnccl.so.}"

gcc -shared -fPIC -O2 -Wall -o "$out/libnccl4j_isoc23.so" "$here/isoc23.c"
shim_symbols="$(nm -D --defined-only "$out/libnccl4j_isoc23.so" | awk '$2 == "T" {print $3}')"
cp "$lib" "$out/libnccl.so.2.tmp"
# shellcheck disable=SC2086
python3 "$here/weaken_glibc.py" "$out/libnccl.so.2.tmp" $shim_symbols
mv "$out/libnccl.so.2.tmp" "$out/libnccl.so.2"
cat > "$out/fixture.properties" <<PROPS
version=$version
origin=$url
sha256=$sha
PROPS
echo "nccl-fixture: NCCL $version from $url"
