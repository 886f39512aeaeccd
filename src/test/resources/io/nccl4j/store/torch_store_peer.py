"""PyTorch's own TCPStore on one side of the nccl4j store tests (PyTorchStoreTest).

client HOST PORT: a TCPStore client of an nccl4j server; server: a TCPStore master for an nccl4j client.
Each prints one JSON line of what it saw; values are hex so that every byte is compared.
"""
import datetime
import json
import sys

import torch
import torch.distributed as dist

T = datetime.timedelta(seconds=30)
current = not torch.__version__.startswith("1.")


def client(host, port):
    s = dist.TCPStore(host, port, 2, False, timeout=T, wait_for_workers=False)
    seen = {"torch": torch.__version__}
    seen["from_java"] = s.get("from-java").hex()
    s.set("from-python", bytes(range(7, 7 + 40)))
    seen["add"] = s.add("counter", 5)
    seen["add_again"] = s.add("counter", -2)
    seen["cas_absent"] = s.compare_set("cas", "", "first").hex()
    seen["cas_match"] = s.compare_set("cas", "first", "second").hex()
    seen["cas_mismatch"] = s.compare_set("cas", "first", "third").hex()
    if hasattr(s, "check"):  # torch 1.13's binding has no check
        seen["check"] = s.check(["from-java", "from-python"])
        seen["check_missing"] = s.check(["from-java", "never"])
    try:
        s.wait(["never"], datetime.timedelta(milliseconds=300))
        seen["wait_timeout"] = "no timeout"
    except Exception as e:  # a timeout is the expected outcome
        seen["wait_timeout"] = type(e).__name__
    s.set("to-delete", b"x")
    seen["delete"] = s.delete_key("to-delete")
    seen["delete_again"] = s.delete_key("to-delete")
    if current:
        s.multi_set(["m1", "m2"], [b"\x01\x02", b"\x03"])
        seen["multi_get"] = [v.hex() for v in s.multi_get(["m1", "m2", "from-java"])]
        s.append("appended", b"ab")
        s.append("appended", b"cd")
        seen["appended"] = s.get("appended").hex()
    seen["num_keys"] = s.num_keys()
    s.set("python-done", b"1")
    print(json.dumps(seen), flush=True)


def server():
    s = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=T, wait_for_workers=False)
    s.set("from-python", bytes(range(200, 256)))
    print(json.dumps({"port": s.port, "torch": torch.__version__}), flush=True)
    s.wait(["java-done"])
    seen = {"from_java": s.get("from-java").hex(), "counter": s.get("counter").decode(),
            "cas": s.get("cas").hex(), "num_keys": s.num_keys()}
    if hasattr(s, "check"):  # torch 1.13's binding has no check
        seen["deleted"] = s.check(["to-delete"])
    if current:
        seen["multi"] = [v.hex() for v in s.multi_get(["m1", "m2"])]
    print(json.dumps(seen), flush=True)
    s.set("python-done", b"1")
    # Stay until the Java side has read python-done: the store dies with this process.
    s.wait(["java-exit"])


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]))
    else:
        server()
