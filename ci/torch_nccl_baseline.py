#!/usr/bin/env python3
"""PyTorch's own NCCL all-reduce on this machine's GPU, as the baseline of ci/gpu-check.sh: when even
this fails, NCCL does not work here (a sandbox, a driver), and nccl4j's results cannot be judged.

usage: torch_nccl_baseline.py PORT   prints torch/NCCL/CUDA versions, the result and the time."""
import os
import sys
import time

port = sys.argv[1] if len(sys.argv) > 1 else "29512"
start = time.time()
try:
    import torch
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001 - any import failure is the answer
    print("baseline: no PyTorch: %s" % e)
    sys.exit(3)
print("baseline: torch %s, CUDA %s, NCCL %s, cuda available %s, %d GPU(s)" % (
    torch.__version__, torch.version.cuda, ".".join(map(str, torch.cuda.nccl.version())),
    torch.cuda.is_available(), torch.cuda.device_count()))
if not torch.cuda.is_available():
    print("baseline: FAIL: torch sees no CUDA device")
    sys.exit(3)
os.environ.setdefault("NCCL_DEBUG", "WARN")
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%s" % port, rank=0, world_size=1,
                        device_id=torch.device("cuda", 0))
t = torch.arange(1024, dtype=torch.float32, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
ok = torch.equal(t.cpu(), torch.arange(1024, dtype=torch.float32))
dist.destroy_process_group()
print("baseline: %s: PyTorch NCCL all-reduce at world size 1 in %.1f s" % ("PASS" if ok else "FAIL",
                                                                          time.time() - start))
sys.exit(0 if ok else 1)
