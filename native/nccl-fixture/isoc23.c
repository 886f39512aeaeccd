/*
 * The C23 entry points glibc 2.38 added for scanf and strto*: a libnccl.so.2 compiled against
 * glibc >= 2.38 (Debian's libnccl2 from sid) calls these instead of the classic names. Only the
 * native test fixture uses this, on hosts with an older glibc (Debian 12 has 2.36), preloaded so
 * that the real NCCL can be loaded there. The C23 forms differ from the classic ones only in
 * accepting binary literals ("0b101"), which NCCL never parses.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int __isoc23_sscanf(const char* s, const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    int r = vsscanf(s, format, ap);
    va_end(ap);
    return r;
}

int __isoc23_fscanf(FILE* stream, const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    int r = vfscanf(stream, format, ap);
    va_end(ap);
    return r;
}

int __isoc23_scanf(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    int r = vscanf(format, ap);
    va_end(ap);
    return r;
}

long __isoc23_strtol(const char* s, char** end, int base) { return strtol(s, end, base); }
long long __isoc23_strtoll(const char* s, char** end, int base) { return strtoll(s, end, base); }
unsigned long __isoc23_strtoul(const char* s, char** end, int base) { return strtoul(s, end, base); }
unsigned long long __isoc23_strtoull(const char* s, char** end, int base) { return strtoull(s, end, base); }
