"""The daemon gives freed memory back when its calls end (site_node.memory), and calls reuse it meanwhile."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np

from dsroc.v1 import site_pb2 as pb
from site_node.memory import FreedMemory, trim_freed_memory
from site_node.server import SiteServer
from site_node.interceptors.slots import CallSlots

from .conftest import Client


def test_trims_when_the_last_call_ends_and_while_calls_keep_overlapping():
    trims = []
    freed = FreedMemory(interval=3600.0, trim=lambda: trims.append(1), growth=0)
    freed.call_ended(2)
    freed.call_ended(1)
    assert trims == []  # other calls run and the interval has not passed
    freed.call_ended(0)
    assert trims == [1]
    busy = FreedMemory(interval=0.0, trim=lambda: trims.append(2))
    busy.call_ended(5)
    assert trims == [1, 2]  # a site that is never idle still trims once per interval


def test_the_last_call_trims_once_memory_grew_or_a_session_was_let_go():
    trims, rss = [], [100 << 20]
    freed = FreedMemory(interval=3600.0, trim=lambda: trims.append(1), growth=16 << 20, resident=lambda: rss[0])
    rss[0] += 15 << 20
    freed.call_ended(0)
    assert trims == []  # a small call: its pages stay for the next one
    rss[0] += 1 << 20
    freed.call_ended(0)
    assert trims == [1]  # 16 MB since the last trim
    freed.call_ended(0)
    assert trims == [1]  # measured from the trim's end
    freed.note_freed()
    freed.call_ended(1)
    assert trims == [1]  # another call runs
    freed.call_ended(0)
    assert trims == [1, 1]  # a session was let go
    unknown = FreedMemory(interval=3600.0, trim=lambda: trims.append(2), resident=lambda: 0)
    unknown.call_ended(0)
    assert trims == [1, 1, 2]  # resident memory unknown: every last call trims


def test_call_slots_report_the_calls_still_in_progress_of_every_analyst():
    seen = []
    slots = CallSlots(2, on_release=seen.append)
    assert slots.acquire("alice") and slots.acquire("alice") and slots.acquire("bob")
    slots.release("alice")
    slots.release("bob")
    slots.release("alice")
    assert seen == [2, 1, 0]


def test_trimming_gives_the_freed_heap_back_to_the_system():
    # A fresh interpreter: 64 blocks of 1 MB from the heap (glibc serves them from the heap once a freed
    # 2 MB map raised its threshold), all freed but the last, which pins the heap's top so that free()
    # alone cannot shrink it.
    code = textwrap.dedent("""
        import numpy as np
        from site_node.memory import trim_freed_memory

        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024

        big = np.ones(2 << 18); del big
        blocks = [np.ones(1 << 17) for _ in range(64)]
        keep = blocks[-1]
        del blocks
        before = rss()
        assert trim_freed_memory()
        print(before - rss())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) > 40.0  # MB given back of the 63 freed


def test_a_daemon_trims_after_its_calls_and_answers_the_same(site_config):
    assert trim_freed_memory()  # glibc
    server = SiteServer(site_config, address="127.0.0.1:0", trim_memory=True)
    trims = []
    real = server.freed_memory._trim
    server.freed_memory._trim = lambda: (trims.append(1), real())
    growth, server.freed_memory.growth = server.freed_memory.growth, 0  # every last call trims
    server.start()
    try:
        client = Client(server)
        session = client.open()
        assert trims == [1]  # a unary call gives its slot back before its answer leaves
        info, values, _ = client.release(session, pb.SCORE_CLASS_NEGATIVES)
        assert info.n == values.size and np.all(np.diff(values) >= 0)
        deadline = time.monotonic() + 10
        while len(trims) < 2 and time.monotonic() < deadline:  # a stream's slot: once its server side ends
            time.sleep(0.01)
        assert len(trims) == 2
        client.Budget(pb.BudgetRequest(dataset="test"))
        assert len(trims) == 3
        server.freed_memory.growth = growth
        client.Budget(pb.BudgetRequest(dataset="test"))
        assert len(trims) == 3  # a small call: nothing to give back
        client.CloseSession(pb.CloseSessionRequest(session_id=session))
        assert len(trims) == 4  # the session was let go
        client.close()
    finally:
        server.stop(grace=1.0)
