#!/usr/bin/env python3
"""The PyTorch half of a sample pair with `./nccl4j weights`: a trainer and a Java service in one NCCL group.

Rank 0 (this script, by default) hosts a torch.distributed.TCPStore, creates the NCCL unique id and publishes its
128 raw bytes under the key `nccl_unique_id` (NeMo-RL's stateless-group pattern); every rank creates its
communicator with ncclCommInitRank; rank 0 broadcasts weights w[i] = i + 0.5 (float32) and every rank all-reduces
(r + 1) * w, so that every result is exact and every element is checked on both sides.

NCCL is called through ctypes on the very libnccl file torch has mapped (read from /proc/self/maps after torch loaded
it), so that this rank runs the NCCL torch runs; the Java ranks must load the same file (NCCL4J_NCCL_PATH): NCCL
refuses peers of another version. `--print-nccl-path` prints that file and exits, for the Java side to take. Tensors and
streams are torch's. The NCCL_* settings (NCCL_CUMEM_ENABLE, NCCL_P2P_DISABLE, ...) must be the same on both sides:
the communicator's ranks must agree on them.

    python3 samples/python/weights_from_pytorch.py --port 29531 --world-size 2 &
    NCCL4J_NCCL_PATH="$(python3 samples/python/weights_from_pytorch.py --print-nccl-path)" \
        ./nccl4j weights --store 127.0.0.1:29531 --rank 1 --world-size 2

Exit status: 0 every element right, 1 a wrong element, 2 bad usage, 3 no CUDA/NCCL or a timeout.
"""
import argparse
import ctypes
import datetime
import os
import sys
import threading
import time

NCCL_FLOAT32 = 7
NCCL_SUM = 0


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def torch_mapped_nccl():
    """The libnccl file this process has mapped since torch was imported (torch's CUDA library links it), or None
    (a torch without CUDA, or one that links NCCL statically)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
            if os.path.basename(path).startswith("libnccl.so"):
                return path
    return None


def load_nccl(path):
    lib = ctypes.CDLL(path)
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetErrorString.argtypes = [ctypes.c_int]
    lib.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    lib.ncclBroadcast.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    return lib


def check(lib, rc, what):
    if rc != 0:
        raise RuntimeError("%s failed: %s (%d)" % (what, lib.ncclGetErrorString(rc).decode(), rc))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, help="the store's port (required unless --print-nccl-path)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--count", type=int, default=1 << 19)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=120, help="seconds before this rank gives up (exit 3)")
    ap.add_argument("--print-nccl-path", action="store_true",
                    help="print the libnccl file torch has mapped and exit (3 when there is none)")
    a = ap.parse_args()
    if a.print_nccl_path:
        try:
            import torch  # noqa: F401 - importing torch maps its NCCL
        except ImportError as e:
            print("weights: no PyTorch: %s" % e, file=sys.stderr)
            return 3
        path = torch_mapped_nccl()
        if path is None:
            print("weights: torch %s has no libnccl mapped (no CUDA build, or NCCL linked statically)" % torch.__version__,
                  file=sys.stderr)
            return 3
        print(path)
        return 0
    if a.port is None:
        print("weights: usage: --port is required", file=sys.stderr)
        return 2
    if not (2 <= a.world_size <= 4 and 0 <= a.rank < a.world_size and 1 <= a.count <= 1 << 19):
        print("weights: usage: --world-size 2..4, --rank in 0..world size - 1, --count in 1..524288", file=sys.stderr)
        return 2
    # ncclCommInitRank blocks until every rank has come: a peer that never does must not hang this one.
    timer = threading.Timer(a.timeout, lambda: (print("weights: FAIL: rank %d timed out after %d s" % (
        a.rank, a.timeout), flush=True), os._exit(3)))
    timer.daemon = True
    timer.start()
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print("weights: no PyTorch: %s" % e)
        return 3
    if not torch.cuda.is_available():
        print("weights: torch %s sees no CUDA device" % torch.__version__)
        return 3
    path = torch_mapped_nccl()
    if path is None:
        print("weights: torch %s has no libnccl mapped (no CUDA build, or NCCL linked statically)" % torch.__version__)
        return 3
    explicit = os.environ.get("NCCL4J_NCCL_PATH")
    if explicit and os.path.realpath(explicit) != os.path.realpath(path):
        print("weights: NCCL4J_NCCL_PATH is %s but torch runs %s; both sides must load one NCCL" % (explicit, path))
        return 3
    lib = load_nccl(path)
    v = ctypes.c_int()
    check(lib, lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    print("weights: rank %d of %d: torch %s, NCCL %d (%s)" % (a.rank, a.world_size, torch.__version__, v.value,
                                                            path), flush=True)
    started = time.time()
    store = dist.TCPStore(a.host, a.port, a.world_size, a.rank == 0, timeout=datetime.timedelta(seconds=a.timeout),
                          wait_for_workers=False)
    uid = UniqueId()
    if a.rank == 0:
        check(lib, lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        store.set("nccl_unique_id", ctypes.string_at(ctypes.addressof(uid), 128))
    else:
        raw = store.get("nccl_unique_id")
        if len(raw) != 128:
            print("weights: the store holds %d bytes at nccl_unique_id; an NCCL unique id has 128" % len(raw))
            return 3
        ctypes.memmove(ctypes.addressof(uid), raw, 128)
    torch.cuda.set_device(a.device)
    comm = ctypes.c_void_p()
    check(lib, lib.ncclCommInitRank(ctypes.byref(comm), a.world_size, uid, a.rank), "ncclCommInitRank")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    expected = torch.arange(a.count, dtype=torch.float32) + 0.5
    w = expected.cuda() if a.rank == 0 else torch.empty(a.count, dtype=torch.float32, device="cuda")
    check(lib, lib.ncclBroadcast(w.data_ptr(), w.data_ptr(), a.count, NCCL_FLOAT32, 0, comm, stream), "ncclBroadcast")
    torch.cuda.synchronize()
    wrong_broadcast = int((w.cpu() != expected).sum())
    c = w * (a.rank + 1)
    check(lib, lib.ncclAllReduce(c.data_ptr(), c.data_ptr(), a.count, NCCL_FLOAT32, NCCL_SUM, comm, stream),
          "ncclAllReduce")
    torch.cuda.synchronize()
    wrong_sum = int((c.cpu() != expected * (a.world_size * (a.world_size + 1) / 2)).sum())
    check(lib, lib.ncclCommDestroy(comm), "ncclCommDestroy")
    ok = wrong_broadcast == 0 and wrong_sum == 0
    print("weights: %s: rank %d of %d: broadcast of %d float32 from rank 0, %d wrong; all-reduce SUM, %d wrong; %d ms"
          % ("PASS" if ok else "FAIL", a.rank, a.world_size, a.count, wrong_broadcast, wrong_sum,
             (time.time() - started) * 1000), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
