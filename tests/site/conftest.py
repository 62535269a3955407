"""Fixtures for the site tests: site folders with real data files, real servers on loopback, raw-stub clients."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import secrets
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsroc.v1 import site_pb2 as pb
from site_node.rules.approvals import approve_model
from site_node.config import load_config
from site_node.cli.init import sample_dataset
from site_node.security.pki import generate_dev_pki
from site_node.security.signing import public_key_text, sign_release, values_digest
from site_node.server import SiteServer
from site_node.testing import running_server, site_channel, site_stub, write_site_config

TOKENS = {"alice": "token-of-alice", "bob": "token-of-bob"}
# A federation peer the tests play: its releases (any values) are signed with this key, which every
# test site lists under [peers.testpeer].
PEER_KEY = Ed25519PrivateKey.generate()


def test_pki():
    """The development PKI every default test site serves with (mutual TLS), made once per test run."""
    global _PKI
    if _PKI is None:
        folder = Path(tempfile.mkdtemp(prefix="dsroc-test-pki-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _PKI = generate_dev_pki(folder)
    return _PKI


_PKI = None


def client_tls(server: SiteServer) -> dict:
    """The :func:`site_channel` keywords of a client of ``server``: mutual TLS with :func:`test_pki`'s client
    certificate, or none for an insecure server."""
    if server.insecure:
        return {}
    pki = test_pki()
    return {"ca_cert": pki.ca_cert, "client_cert": pki.client_cert, "client_key": pki.client_key}


def channel_to(server: SiteServer, **options):
    """A raw gRPC channel to a running ``server`` (:func:`client_tls`), for calls beside the site API."""
    return site_channel(server.bound_address, **client_tls(server), **options)


def make_config(directory, *, frames=None, policy=None, site=None, analysts=None, tls=None, datasets=None, peers=None):
    """A SiteConfig in ``directory`` with CSV datasets written from ``frames`` (name -> DataFrame), serving mutual TLS
    with :func:`test_pki` unless ``tls`` says otherwise (``tls=False``: no TLS files)."""
    frames = {"test": sample_dataset(300, seed=1)} if frames is None else frames
    path = write_site_config(
        directory, frames=frames, dataset={"outcomes": ["y"], "scores": ["pred"],
                                           "model_columns": ["age", "size", "nodes", "grade"]},
        datasets=datasets, site=site, tls=test_pki() if tls is None else tls,
        policy={"protocols": ["histogram", "paper", "boyd"], "max_delta": 0.01, "budget_epsilon": 20.0,
                **(policy or {})},
        analysts=analysts if analysts is not None else {
            "alice": TOKENS["alice"],
            "bob": {"token_sha256": hashlib.sha256(TOKENS["bob"].encode()).hexdigest(), "datasets": []},
        },
        peers={"testpeer": public_key_text(PEER_KEY), **(peers or {})})
    return load_config(path)


def peer_release(score_class, values, *, key=PEER_KEY, site="testpeer") -> pb.ReleaseInfo:
    """A ReleaseInfo of ``values`` signed as a release of a peer site (what the analyst forwards)."""
    values = np.asarray(values, dtype=float)
    fields = {"site": site, "population": "test", "dataset": "test", "source": "column:pred", "outcome": "y",
              "release_id": secrets.token_hex(16), "score_class": int(score_class), "epsilon": 1.0, "delta": 1e-5,
              "sensitivity": 1.0, "n": values.size, "values_sha256": values_digest(values)}
    return pb.ReleaseInfo(**fields, signature=sign_release(key, fields))


class Client:
    """The raw generated stub with a bearer token on every call, plus streaming helpers.

    ``address`` is a ``host:port`` (plain text unless TLS files are given) or a running :class:`SiteServer`, whose
    client it then is: mutual TLS with :func:`test_pki`'s client certificate unless the server is insecure.
    """

    def __init__(self, address, token=TOKENS["alice"], **tls):
        if isinstance(address, SiteServer):
            address, tls = address.bound_address, {**client_tls(address), **tls}
        self.channel = site_channel(address, **tls)
        self.stub = site_stub(self.channel)
        self.metadata = [("authorization", f"Bearer {token}")] if token else []

    def __getattr__(self, name):
        method = getattr(self.stub, name)
        return lambda request, **kw: method(request, metadata=self.metadata, timeout=60, **kw)

    def open(self, dataset="test", outcome="y", column="pred", model=None):
        score = pb.ScoreSource(model=model) if model is not None else pb.ScoreSource(score_column=column)
        return self.OpenSession(pb.OpenSessionRequest(dataset=dataset, outcome=outcome, score=score)).session_id

    def release(self, session, score_class, epsilon=5.0, delta=0.01, sensitivity=0.0, chunk_size=0):
        chunks = list(self.ReleaseNoisyScores(pb.ReleaseRequest(
            session_id=session, score_class=score_class, epsilon=epsilon, delta=delta, sensitivity=sensitivity,
            chunk_size=chunk_size)))
        values = np.concatenate([np.frombuffer(c.scores, dtype="<f8") for c in chunks])
        return chunks[0].info, values, chunks

    def upload(self, session, score_class, values, chunk=10_000, n=None, segments=None):
        """Upload ``values`` as one release of the test peer (signed with ``PEER_KEY``) unless ``segments`` are given."""
        values = np.asarray(values, dtype=float)
        if segments is None:
            segments = [peer_release(score_class, values)]

        def messages():
            header = pb.SurvivorHeader(session_id=session, score_class=score_class,
                                       n=values.size if n is None else n, segments=segments)
            yield pb.SurvivorChunk(header=header, scores=values[:chunk].tobytes())
            for i in range(chunk, values.size, chunk):
                yield pb.SurvivorChunk(scores=values[i:i + chunk].tobytes())

        return self.UploadSurvivor(messages())

    def upload_both(self, session, negatives, positives, answers=None, chunk=10_000):
        """Both classes in one UploadSurvivors stream (each one release of the test peer), ``answers`` in the first header."""
        def messages():
            for k, (cls, values) in enumerate(((pb.SCORE_CLASS_NEGATIVES, negatives), (pb.SCORE_CLASS_POSITIVES, positives))):
                values = np.asarray(values, dtype=float)
                header = pb.SurvivorHeader(session_id=session, score_class=cls, n=values.size,
                                           segments=[peer_release(cls, values)], answers=answers if k == 0 else None)
                yield pb.SurvivorChunk(header=header, scores=values[:chunk].tobytes())
                for i in range(chunk, values.size, chunk):
                    yield pb.SurvivorChunk(scores=values[i:i + chunk].tobytes())

        return self.UploadSurvivors(messages())

    def close(self):
        self.channel.close()


@pytest.fixture
def site_config(tmp_path):
    return make_config(tmp_path / "site")


@pytest.fixture
def server(site_config):
    with running_server(site_config) as srv:
        yield srv


@pytest.fixture
def client(server):
    c = Client(server)
    yield c
    c.close()


@pytest.fixture
def client_factory():
    clients = []

    def make(address, token=TOKENS["alice"], **tls):
        clients.append(Client(address, token, **tls))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


def ledger_snapshot(path) -> tuple:
    """Everything in a ledger database (releases, stored values, query counters), for before/after checks."""
    with sqlite3.connect(path) as db:
        return tuple(tuple(db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall())
                     for t in ("releases", "glm_evaluations", "survivor_uploads", "models"))


@pytest.fixture
def snapshot():
    return ledger_snapshot


@pytest.fixture
def make_site_config(tmp_path):
    def make(name="site", **kw):
        return make_config(tmp_path / name, **kw)
    return make


@pytest.fixture
def client_cls():
    return Client


@pytest.fixture
def frame():
    """The data of the default ``test`` dataset."""
    return sample_dataset(300, seed=1)


def read_frame(config, name="test") -> pd.DataFrame:
    return pd.read_csv(config.datasets[name].path)


@pytest.fixture
def tls_pki(tmp_path):
    """A development PKI (CA, server and client certificates) for real mutual-TLS daemons."""
    return generate_dev_pki(tmp_path / "pki")


@pytest.fixture
def tls_site(tmp_path, tls_pki, client_factory):
    """Start REAL mutual-TLS daemons: ``make(name="site", config=None, token=alice, **make_config kw)``.

    Returns ``(server, client)``; pass ``config`` to restart a daemon on an existing site folder.
    """
    tls = {"cert": str(tls_pki.server_cert), "key": str(tls_pki.server_key), "client_ca": str(tls_pki.ca_cert)}
    stack = contextlib.ExitStack()

    def make(name="site", *, config=None, token=TOKENS["alice"], **kw):
        config = config or make_config(tmp_path / name, tls=tls, **kw)
        server = stack.enter_context(running_server(config))
        return server, tls_client(client_factory, server.bound_address, tls_pki, token)

    with stack:
        yield make


def tls_client(client_factory, address, pki, token=TOKENS["alice"]):
    """A :class:`Client` over mutual TLS with the dev PKI's client certificate."""
    return client_factory(address, token, ca_cert=pki.ca_cert, client_cert=pki.client_cert,
                          client_key=pki.client_key)


@pytest.fixture
def approve():
    """``approve(config, model)``: the site administrator approves a ``dsroc.v1.GlmModel`` for the paper protocol."""

    def run(config, model: pb.GlmModel) -> str:
        return approve_model(config, {"link": {pb.LINK_LOGIT: "logit", pb.LINK_PROBIT: "probit"}[model.link],
                                      "intercept": model.intercept,
                                      "coefficients": {c.name: c.value for c in model.coefficients}})

    return run


@pytest.fixture(name="peer_release")
def peer_release_fixture():
    """:func:`peer_release`: a ReleaseInfo of any values, signed by the test peer."""
    return peer_release


def wait_until(predicate, timeout: float = 15.0) -> bool:
    """Whether ``predicate()`` becomes true within ``timeout`` seconds (polled every 0.1 s): a daemon applies a
    reload or a revocation asynchronously."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False
