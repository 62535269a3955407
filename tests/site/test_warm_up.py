"""The daemon's warm-up: every dataset read and its score columns prepared before the first validation needs them."""

from __future__ import annotations

import numpy as np

from site_node.data.datasets import DatasetStore, read_table
from site_node.cli.init import sample_dataset
from site_node.store.ledger import SqliteLedger
from site_node.data.scores import ScoreSpec
from site_node.site import Site


def test_after_the_warm_up_a_session_reads_nothing(make_site_config, frame):
    config = make_site_config(frames={"test": frame, "other": sample_dataset(200, seed=2)},
                              datasets={"broken": {"path": "data/missing.csv", "outcomes": ["y"]}})
    reads = []

    def reader(dataset_config):
        reads.append(dataset_config.name)
        return read_table(dataset_config)

    ledger = SqliteLedger.in_memory()
    site = Site(config, ledger, datasets=DatasetStore(config.datasets, reader=reader))
    try:
        assert site.warm_up() == 2  # the unreadable dataset is skipped (a request names it)
        assert sorted(reads) == ["broken", "other", "test"]
        reads.clear()
        session = site.open_session("alice", "test", "y", ScoreSpec(column="pred"))
        data = session.data
        # Prepared already: the classes split and sorted, checked against the frame.
        assert "sorted_negatives" in data.__dict__ and "fingerprint" in data.__dict__
        y, s = frame["y"].to_numpy(), frame["pred"].to_numpy()
        np.testing.assert_array_equal(data.sorted_negatives, np.sort(s[y == 0]))
        np.testing.assert_array_equal(data.sorted_positives, np.sort(s[y == 1]))
        assert reads == []
    finally:
        site.close()
        ledger.close()


def test_health_reports_serving_only_once_the_warm_up_is_done(site_config):
    """SERVING means warm: NOT_SERVING while the datasets are read, SERVING after, NOT_SERVING once stopping."""
    import threading

    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from site_node.server import SiteServer

    from .conftest import channel_to, wait_until

    server = SiteServer(site_config, address="127.0.0.1:0", warm_up=True)
    reading, done = threading.Event(), threading.Event()
    warm_up = server.site.warm_up

    def slow_warm_up():
        reading.set()
        done.wait(30)
        return warm_up()

    server.site.warm_up = slow_warm_up
    server.start()
    try:
        with channel_to(server) as channel:
            stub = health_pb2_grpc.HealthStub(channel)

            def status():
                return stub.Check(health_pb2.HealthCheckRequest(service="dsroc.v1.SiteService"), timeout=10).status

            assert reading.wait(10)
            assert status() == health_pb2.HealthCheckResponse.NOT_SERVING
            done.set()
            assert wait_until(lambda: status() == health_pb2.HealthCheckResponse.SERVING)
            assert "sorted_negatives" in server.site.open_session("alice", "test", "y", ScoreSpec(column="pred")).data.__dict__
    finally:
        done.set()
        server.stop(grace=1)


def test_after_the_warm_up_a_histogram_release_imports_nothing(tmp_path):
    """In a fresh interpreter (as a daemon starts): after the warm-up, the first histogram release of a session imports
    no module (the accountant, OpenDP's sampler and the grid were loaded before; dp-accounting is never needed), and its
    noisy counts add up to the data's class sizes up to the noise."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = f"""
import sys
from pathlib import Path
from tests.site.conftest import make_config
from site_node.data.datasets import DatasetStore, read_table
from site_node.data.scores import ScoreSpec
from site_node.protocols.histogram.protocol import HistogramProtocol
from site_node.site import Site
from site_node.store.ledger import SqliteLedger

config = make_config(Path({str(tmp_path)!r}) / "site")
ledger = SqliteLedger(config.ledger_path)
site = Site(config, ledger, datasets=DatasetStore(config.datasets, reader=read_table))
site.warm_up()
protocol = HistogramProtocol(site)
session = site.open_session("alice", "test", "y", ScoreSpec(column="pred"))
before = set(sys.modules)
out = protocol.release(session, epsilon=5.0, delta=1e-6, n_bins=10, spacing="equal", score_sums=True)
print(sorted(set(sys.modules) - before), "dp_accounting" in sys.modules, int(out.negatives.sum()),
      int(out.positives.sum()), out.charged)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    new, accounting, n0, n1, charged = out.stdout.rsplit(maxsplit=4)
    assert (new, accounting, charged) == ("[]", "False", "True")
    y = sample_dataset(300, seed=1)["y"].to_numpy()
    # 10 cells per class, each with discrete Laplace noise of SD about 2.1 at a counts' epsilon of 3.5
    assert abs(int(n0) - int((y == 0).sum())) < 40 and abs(int(n1) - int((y == 1).sum())) < 40
