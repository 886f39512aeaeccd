"""PyTorch's own TCPStore on one side of the nccl4j store tests (PyTorchStoreTest).

client HOST PORT: a TCPStore client of an nccl4j server; server: a TCPStore master for an nccl4j client;
queues HOST PORT: torch 2.x's queue, list_keys and barrier methods, from clients of the server at HOST:PORT;
queues-own: the same against a libuv TCPStore master of this process, whose answers are the ones to match.
Each prints one JSON line of what it saw; values are hex so that every byte is compared.
"""
import datetime
import json
import sys
import threading
import time

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


def outcome(call):
    """What a call did: its value, or the exception's type and message."""
    try:
        v = call()
        return v.hex() if isinstance(v, bytes) else v
    except Exception as e:  # the outcome is what is compared
        return "%s: %s" % (type(e).__name__, e)


def until(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)


def queues(host, port):
    def store(timeout=T):
        return dist.TCPStore(host, port, 2, False, timeout=timeout, wait_for_workers=False)

    a, b, c = store(), store(), store()
    short = store(datetime.timedelta(milliseconds=300))
    every, reversed_bytes, text = bytes(range(256)), bytes(range(255, -1, -1)), "wert \u2713".encode()
    seen = {}
    # A query that is not answered is not ordered with another client's: each client that pushes or sets for
    # another to see asks something after it (its server may serve every client on a thread of its own).
    a.queue_push("q", every)
    a.queue_push("q", b"")
    seen["len_first"] = a.queue_len("q")
    b.queue_push("q", text)
    seen["len_pusher"] = b.queue_len("q")
    a.queue_push("q", reversed_bytes)
    seen["len"] = a.queue_len("q")
    seen["len_other_client"] = c.queue_len("q")
    seen["len_never"] = a.queue_len("never")
    seen["check_queue"] = a.check(["q"])
    seen["num_keys_with_queue"] = a.num_keys()
    seen["pops"] = [outcome(lambda: a.queue_pop("q", block=False)), outcome(lambda: b.queue_pop("q", block=False)),
                    outcome(lambda: a.queue_pop("q")), outcome(lambda: c.queue_pop("q", block=False))]
    seen["len_after"] = a.queue_len("q")
    seen["check_empty_queue"] = a.check(["q"])
    seen["pop_empty"] = outcome(lambda: a.queue_pop("q", block=False))
    seen["pop_never"] = outcome(lambda: a.queue_pop("never", block=False))
    seen["after_pop_empty"] = outcome(lambda: a.queue_len("q"))

    # A blocking pop waits for the push; two blocked pops wake one per push, the first to wait first.
    got = {}

    def pop_into(s, key, name):
        got[name] = outcome(lambda: s.queue_pop(key))

    first = threading.Thread(target=pop_into, args=(b, "bq", "blocked"))
    first.start()
    time.sleep(0.3)
    seen["blocked_before_push"] = "blocked" in got
    a.queue_push("bq", b"\x01\x02")
    first.join(20)
    seen["blocked_pop"] = got.get("blocked")
    one = threading.Thread(target=pop_into, args=(b, "wq", "first"))
    one.start()
    time.sleep(0.3)
    two = threading.Thread(target=pop_into, args=(c, "wq", "second"))
    two.start()
    time.sleep(0.3)
    a.queue_push("wq", b"x")
    until(lambda: "first" in got or "second" in got)
    time.sleep(0.5)
    seen["woken_by_one_push"] = sorted(k for k in ("first", "second") if k in got)
    a.queue_push("wq", b"y")
    one.join(20)
    two.join(20)
    seen["woken"] = [got.get("first"), got.get("second")]
    seen["pop_timeout"] = outcome(lambda: short.queue_pop("nothing"))
    seen["after_pop_timeout"] = outcome(lambda: short.queue_len("wq"))

    # Queues are not keys: list_keys names the keys, without the client's "/".
    a.set("lk-a", every)
    b.set("lk-b", b"")
    b.check(["lk-b"])
    seen["list_keys"] = sorted(a.list_keys())

    # A barrier of two: the first waits for the second; later arrivals pass; one alone times out.
    waiter = threading.Thread(target=lambda: got.__setitem__("barrier_first", outcome(lambda: b.barrier("bar", 2))))
    waiter.start()
    time.sleep(0.3)
    seen["barrier_first_before_second"] = "barrier_first" in got
    seen["barrier_second"] = outcome(lambda: c.barrier("bar", 2))
    waiter.join(20)
    seen["barrier_first"] = got.get("barrier_first")
    seen["barrier_count"] = a.get("bar").decode()
    seen["barrier_late"] = outcome(lambda: a.barrier("bar", 2))
    seen["barrier_timeout"] = outcome(lambda: short.barrier("bar-alone", 2))
    seen["after_barrier_timeout"] = outcome(lambda: short.get("bar-alone").decode())
    a.set("not-a-number", b"abc")
    a.check(["not-a-number"])
    lost = store()
    seen["barrier_not_a_number"] = outcome(lambda: lost.barrier("not-a-number", 2)).split(":")[0]
    seen["after_barrier_not_a_number"] = outcome(lambda: a.get("not-a-number").decode())
    seen["list_keys_at_end"] = sorted(a.list_keys())
    seen["num_keys_at_end"] = a.num_keys()
    print(json.dumps(seen), flush=True)


def queues_own():
    master = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=T, wait_for_workers=False, use_libuv=True)
    assert master.libuvBackend
    queues("127.0.0.1", master.port)


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "queues":
        queues(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "queues-own":
        queues_own()
    else:
        server()
