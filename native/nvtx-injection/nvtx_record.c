/*
 * An NVTX injection library for tests: loaded by any NVTX library (libnvToolsExt.so.1 or
 * libnvtx3interop.so.1) when NVTX_INJECTION64_PATH names it, it records every range push and pop
 * and every mark, one line each ("push <name>", "pop", "mark <name>"), to the file named by
 * NCCL4J_NVTX_RECORD (stderr when unset). This is how Nsight attaches; the test proves nccl4j's
 * ranges reach an NVTX tool. Needs no NVTX or CUDA headers: the few ABI pieces used are declared
 * here, with the values of NVTX v3's nvtxDetail/nvtxTypes.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stddef.h>

typedef void (*NvtxFunctionPointer)(void);
typedef NvtxFunctionPointer** NvtxFunctionTable;
typedef const void* (*NvtxGetExportTableFunc_t)(uint32_t exportTableId);

typedef struct NvtxExportTableCallbacks {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int callback_module, NvtxFunctionTable* out_table, unsigned int* out_size);
} NvtxExportTableCallbacks;

enum {
    NVTX_ETID_CALLBACKS = 1,
    NVTX_CB_MODULE_CORE = 1,
    NVTX_CBID_CORE_MarkA = 2,
    NVTX_CBID_CORE_RangePushA = 9,
    NVTX_CBID_CORE_RangePop = 11
};

static FILE* out;
static int depth;

static int record_push(const char* message) {
    fprintf(out, "push %s\n", message ? message : "(null)");
    fflush(out);
    return depth++;
}

static int record_pop(void) {
    fprintf(out, "pop\n");
    fflush(out);
    return --depth;
}

static void record_mark(const char* message) {
    fprintf(out, "mark %s\n", message ? message : "(null)");
    fflush(out);
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    const char* path = getenv("NCCL4J_NVTX_RECORD");
    out = path ? fopen(path, "a") : stderr;
    if (!out) {
        return 0;
    }
    const NvtxExportTableCallbacks* cb = (const NvtxExportTableCallbacks*) getExportTable(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) {
        return 0;
    }
    if (size > NVTX_CBID_CORE_MarkA) {
        *table[NVTX_CBID_CORE_MarkA] = (NvtxFunctionPointer) record_mark;
    }
    if (size > NVTX_CBID_CORE_RangePop) {
        *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer) record_push;
        *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer) record_pop;
    }
    fprintf(out, "injected\n");
    fflush(out);
    return 1;
}
