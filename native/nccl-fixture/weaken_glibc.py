#!/usr/bin/env python3
"""Lets a shared library built against a newer glibc load on this host, for the native tests.

usage: weaken_glibc.py LIBRARY SHIM_SYMBOLS...

readelf (binutils) is the ELF reader. Every version the library needs from libc.so.6 that this
host's glibc lacks is marked VER_FLG_WEAK in .gnu.version_r, so the dynamic linker no longer
refuses the library; the symbols of those versions must all be among SHIM_SYMBOLS (provided by a
preloaded shim), otherwise this refuses, naming the symbol, rather than leave a call that would
fail at run time.
"""
import os
import re
import struct
import subprocess
import sys

VER_FLG_WEAK = 0x2


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def main():
    lib, shim = sys.argv[1], set(sys.argv[2:])
    host = os.confstr("CS_GNU_LIBC_VERSION").split()[1]  # "glibc 2.36"
    out = subprocess.run(["readelf", "-V", "-W", lib], check=True, capture_output=True, text=True).stdout
    section = re.search(r"Version needs section '\.gnu\.version_r'.*?\n\s*Addr: \S+\s+Offset: (0x[0-9a-f]+)", out)
    if section is None:
        print("weaken_glibc: %s needs no symbol versions" % lib)
        return 0
    base = int(section.group(1), 16)
    needs = out[section.end():]
    newer = {}
    current_file = None
    for line in needs.splitlines():
        m = re.match(r"\s*(0x[0-9a-f]+|0+): Version: \d+\s+File: (\S+)", line)
        if m:
            current_file = m.group(2)
            continue
        m = re.match(r"\s*(0x[0-9a-f]+|0+):\s+Name: GLIBC_([0-9.]+)\s+Flags: (\S+)", line)
        if m and current_file == "libc.so.6" and version_key(m.group(2)) > version_key(host):
            newer["GLIBC_" + m.group(2)] = base + int(m.group(1), 16)
    if not newer:
        print("weaken_glibc: %s runs on glibc %s unchanged" % (lib, host))
        return 0
    symbols = subprocess.run(["objdump", "-T", lib], check=True, capture_output=True, text=True).stdout
    for line in symbols.splitlines():
        m = re.search(r"\*UND\*\s+\S+\s+\(?(GLIBC_[0-9.]+)\)?\s+(\S+)$", line)
        if m and m.group(1) in newer and m.group(2) not in shim:
            print("weaken_glibc: %s needs %s@%s, which glibc %s lacks and the shim does not provide"
                  % (lib, m.group(2), m.group(1), host), file=sys.stderr)
            return 1
    with open(lib, "r+b") as f:
        for name, entry in sorted(newer.items()):
            f.seek(entry + 4)  # Elf64_Vernaux: vna_hash (4 bytes), then vna_flags (2)
            (flags,) = struct.unpack("<H", f.read(2))
            f.seek(entry + 4)
            f.write(struct.pack("<H", flags | VER_FLG_WEAK))
    print("weaken_glibc: %s: %s marked weak for glibc %s" % (lib, ", ".join(sorted(newer)), host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
