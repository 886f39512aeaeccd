/*
 * NVTX through whichever NVTX library this machine has, loaded at run time with dlopen:
 * libnvtx3interop.so.1 (CUDA >= 12.9, pip nvidia-nvtx) or libnvToolsExt.so.1 (older CUDA). Both export
 * the same C functions (nvtxRangePushA, nvtxRangePop, nvtxMarkA). Used by the JavaCPP class
 * io.nccl4j.internal.bind.nccl.Nvtx3Interop; nothing here needs NVTX headers or libraries at build time.
 */
#ifndef NCCL4J_NVTX3_H
#define NCCL4J_NVTX3_H

#include <dlfcn.h>
#include <stddef.h>

typedef int (*nccl4j_push_fn)(const char*);
typedef int (*nccl4j_pop_fn)(void);
typedef void (*nccl4j_mark_fn)(const char*);

static void* nccl4j_nvtx_handle = NULL;
static nccl4j_push_fn nccl4j_push = NULL;
static nccl4j_pop_fn nccl4j_pop = NULL;
static nccl4j_mark_fn nccl4j_mark = NULL;

/* Loads the library at path (or the sonames, when path is NULL or empty). 0 on success, -1 if absent. */
static inline int nccl4j_nvtx3_load(const char* path) {
    if (nccl4j_nvtx_handle != NULL) {
        return 0;
    }
    void* h = NULL;
    if (path != NULL && path[0] != '\0') {
        h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    } else {
        h = dlopen("libnvtx3interop.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (h == NULL) {
            h = dlopen("libnvToolsExt.so.1", RTLD_NOW | RTLD_GLOBAL);
        }
    }
    if (h == NULL) {
        return -1;
    }
    nccl4j_push = (nccl4j_push_fn) dlsym(h, "nvtxRangePushA");
    nccl4j_pop = (nccl4j_pop_fn) dlsym(h, "nvtxRangePop");
    nccl4j_mark = (nccl4j_mark_fn) dlsym(h, "nvtxMarkA");
    if (nccl4j_push == NULL || nccl4j_pop == NULL) {
        nccl4j_push = NULL;
        nccl4j_pop = NULL;
        nccl4j_mark = NULL;
        dlclose(h);
        return -2;
    }
    nccl4j_nvtx_handle = h;
    return 0;
}

/* The dlerror() text of the last failed load, or "". */
static inline const char* nccl4j_nvtx3_error(void) {
    const char* e = dlerror();
    return e == NULL ? "" : e;
}

static inline int nccl4j_nvtx3_push(const char* name) {
    return nccl4j_push == NULL ? -1 : nccl4j_push(name);
}

static inline int nccl4j_nvtx3_pop(void) {
    return nccl4j_pop == NULL ? -1 : nccl4j_pop();
}

static inline void nccl4j_nvtx3_mark(const char* name) {
    if (nccl4j_mark != NULL) {
        nccl4j_mark(name);
    }
}

#endif
