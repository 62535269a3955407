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
