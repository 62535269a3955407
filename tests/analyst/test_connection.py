"""Connections: gRPC's retry policy (UNAVAILABLE only), fast TLS and token failures that say what to check,
describe/budget answers from the sites that answer, the budget in the analyst's terms, recommend by policy, and
upload messages serialized as protobuf would."""

import contextlib
import json
import math
import socket
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from analyst import Federation, SiteConfig, SiteError
from analyst.cli import budget_rows, main
from dsroc.v1 import site_pb2 as pb
from dsroc.v1 import site_pb2_grpc
from site_node.cli.init import init_site
from site_node.security.pki import generate_dev_pki
from site_node.testing import running_server

ROOT = Path(__file__).resolve().parents[2]


class FlakyService(site_pb2_grpc.SiteServiceServicer):
    """A real gRPC server whose Describe fails with ``code`` for the first ``failures`` calls."""

    def __init__(self, failures: int, code=grpc.StatusCode.UNAVAILABLE):
        self.failures, self.code, self.calls = failures, code, 0
        self.lock = threading.Lock()

    def Describe(self, request, context):
        with self.lock:
            self.calls += 1
            fail = self.calls <= self.failures
        if fail:
            context.abort(self.code, "try again")
        return pb.DescribeResponse(site_name="flaky")


@contextlib.contextmanager
def flaky_server(service, pki):
    """``service`` on a real gRPC server with the test PKI's server certificate (TLS, as a site serves)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    site_pb2_grpc.add_SiteServiceServicer_to_server(service, server)
    credentials = grpc.ssl_server_credentials([(pki.server_key.read_bytes(), pki.server_cert.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


@pytest.mark.parametrize("failures, retries, ok, calls", [(2, 2, True, 3), (2, 1, False, 2), (0, 3, True, 1)])
def test_unavailable_is_retried_by_the_grpc_retry_policy(failures, retries, ok, calls, pki):
    service = FlakyService(failures)
    with flaky_server(service, pki) as address:
        with Federation([SiteConfig(name="f", address=address, token="t", ca_file=pki.ca_cert)], retries=retries) as fed:
            if ok:
                assert fed.describe()["f"]["site_name"] == "flaky"
            else:
                with pytest.raises(SiteError) as err:
                    fed.describe()
                assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert service.calls == calls


def test_other_statuses_are_not_retried(pki):
    service = FlakyService(5, code=grpc.StatusCode.PERMISSION_DENIED)
    with flaky_server(service, pki) as address:
        with Federation([SiteConfig(name="f", address=address, token="t", ca_file=pki.ca_cert)], retries=4) as fed:
            with pytest.raises(SiteError):
                fed.describe()
    assert service.calls == 1


def test_retries_are_bounded_by_grpc(pki):
    with pytest.raises(ValueError, match="from 0 to 4"):
        Federation([SiteConfig(name="f", address="127.0.0.1:1", token="t", ca_file=pki.ca_cert)], retries=5)


@pytest.fixture(scope="module")
def mutual_tls_site(tmp_path_factory):
    """A site from ``dsroc-site init`` (mutual TLS) running in process."""
    root = tmp_path_factory.mktemp("mtls")
    result = init_site(root / "s", name="mtls")
    with running_server(result.config) as server:
        yield result, server.bound_address, generate_dev_pki(root / "other")


def _site(result, address, **kw):
    adir = result.snippet.parent
    base = dict(name="mtls", address=address, token=result.token, ca_file=adir / "ca.crt",
                client_cert=adir / "client.crt", client_key=adir / "client.key")
    base.update(kw)
    return SiteConfig(**base)


@pytest.mark.parametrize("case, hint", [
    ("wrong CA", "check that ca_file"),
    ("no client certificate", "requires a client certificate"),
    ("foreign client certificate", "check client_cert and client_key"),
    ("bad token", "check this site's token"),
])
def test_tls_and_auth_failures_fail_fast_and_say_what_to_check(mutual_tls_site, case, hint):
    result, address, other = mutual_tls_site
    config = {"wrong CA": dict(ca_file=other.ca_cert),
              "no client certificate": dict(client_cert=None, client_key=None),
              "foreign client certificate": dict(client_cert=other.client_cert, client_key=other.client_key),
              "bad token": dict(token="not-the-token")}[case]
    started = time.perf_counter()
    with Federation([_site(result, address, **config)]) as fed:  # default: 3 retries, 30 s deadline
        with pytest.raises(SiteError) as err:
            fed.describe()
    assert time.perf_counter() - started < 2.0
    assert hint in str(err.value)


def test_describe_and_budget_answer_for_the_sites_that_answer(tmp_path, five_sites, pki, helpers, capsys):
    _, addresses, _ = five_sites
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens there once closed
    (tmp_path / "t").write_text(helpers.TOKEN)
    lines = []
    for name, a in (("s0", addresses[0]), ("down", dead), ("s1", addresses[1])):
        lines += ["[[sites]]", f'name = "{name}"', f'address = "{a}"', 'token_file = "t"', f'ca_file = "{pki.ca_cert}"', ""]
    fed = tmp_path / "f.toml"
    fed.write_text("\n".join(lines))
    assert main(["describe", "--federation", str(fed)]) == 4
    out = capsys.readouterr()
    assert "s0 (s0" in out.out and "s1 (s1" in out.out and "down: FAILED (UNAVAILABLE)" in out.out
    assert "2 of 3 sites answered" in out.err
    assert main(["budget", "--federation", str(fed), "--dataset", "test", "--json"]) == 4
    data = json.loads(capsys.readouterr().out)
    assert data["down"]["error"]["code"] == "UNAVAILABLE" and "mu_remaining" in data["s1"]
    # every site down: the error, exit 3
    fed.write_text("\n".join(lines[6:12]))
    assert main(["budget", "--federation", str(fed), "--dataset", "test"]) == 3


def _gdp_epsilon(mu, delta):
    """epsilon of mu-GDP at delta (Dong, Roth & Su 2022, Cor. 2.13), solved with scipy."""
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return brentq(f, 0, 100)


def _gaussian_mu(epsilon, delta):
    """mu of the analytic Gaussian mechanism at (epsilon, delta): the largest mu-GDP that is (epsilon, delta)-DP."""
    return brentq(lambda mu: norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)
                  - delta, 1e-6, 50)


def test_budget_in_the_analysts_terms(tmp_path, pki, helpers, capsys):
    path = helpers.write_site(tmp_path / "b", "b", helpers.site_frames(seed=3)[0], pki)
    with running_server(path) as server:
        with helpers.federation([server.bound_address], pki) as fed:
            res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01)
            answers = fed.budget("test", epsilon=5, delta=0.01)
        (tmp_path / "t").write_text(helpers.TOKEN)
        (tmp_path / "f.toml").write_text(f'[[sites]]\nname = "s0"\naddress = "{server.bound_address}"\n'
                                         f'token_file = "t"\nca_file = "{pki.ca_cert}"\n')
        assert main(["budget", "--federation", str(tmp_path / "f.toml"), "--dataset", "test"]) == 0
    text = capsys.readouterr().out
    row = budget_rows(answers, epsilon=5, delta=0.01)[0]
    b = answers["s0"]
    mu = _gaussian_mu(5, 0.01)
    assert b["mu_spent"] == pytest.approx(mu, rel=1e-6)  # negatives and positives: disjoint, one mu
    assert row["epsilon_spent_at_request_delta"] == pytest.approx(_gdp_epsilon(b["mu_spent"], 0.01), rel=1e-6)
    assert row["epsilon_spent_at_budget_delta"] == pytest.approx(_gdp_epsilon(b["mu_spent"], 0.05), rel=1e-6)
    # Gaussian DP composes by mu^2: the site's accountant must count exactly floor(mu_left^2 / mu^2) more
    left = (b["mu_budget"] ** 2 - b["mu_spent"] ** 2) / mu ** 2
    assert row["validations_left"]["paper"] == str(math.floor(left))
    assert f"paper {math.floor(left)}, histogram " in text and "boyd " in text
    # the summary says what one validation at (5, 0.01) spent in the request's terms: epsilon 5 at delta 0.01
    line = next(x for x in res.summary(verbose=True).splitlines() if x.startswith("  s0 "))
    assert "  5.00; " in line and "of 200 at delta 0.05" in line
    brief = next(x for x in str(res).splitlines() if x.startswith("  s0 "))  # the one screen: spent, of the budget
    assert brief.endswith(" 5.00 of 200")


def test_after_histogram_releases_budget_and_describe_count_what_the_site_accepts(tmp_path, pki, helpers, capsys):
    """Before: after three histogram releases `dsroc budget` said "0 spent, validations left 3" (from the
    Gaussian-DP mu fields alone) while the site refused every further validation."""
    path = helpers.write_site(tmp_path / "h", "h", helpers.site_frames(seed=4)[0], pki,
                              policy={"budget_epsilon": 6.0, "max_epsilon": 6.0})
    (tmp_path / "t").write_text(helpers.TOKEN)
    with running_server(path) as server:
        (tmp_path / "f.toml").write_text(f'[[sites]]\nname = "s0"\naddress = "{server.bound_address}"\n'
                                         f'token_file = "t"\nca_file = "{pki.ca_cert}"\n')
        cli = ["--federation", str(tmp_path / "f.toml")]
        with helpers.federation([server.bound_address], pki) as fed:
            (before,) = fed.budget("test", epsilon=3.0, delta=0.01).values()
            fits = int(next(x for x in before["left"] if x["query"]["protocol"] == "histogram")["releases"])
            # discrete Laplace releases are pure epsilon-DP: two at epsilon 3 compose to exactly 6, the budget; a
            # third's loss exceeds 6 with probability far above the budget's delta 0.05
            assert fits == 2
            # the site's count is its ledger's: exactly that many more histogram releases are accepted
            for n_bins in (5, 8, 10, 12, 20, 50)[:fits]:
                fed.validate("test", "y", protocol="histogram", score="pred", epsilon=3.0, delta=0.01, n_bins=n_bins,
                             spacing="equal")
            with pytest.raises(SiteError) as refused:
                fed.validate("test", "y", protocol="histogram", score="pred", epsilon=3.0, delta=0.01, n_bins=100,
                             spacing="equal")
            assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            (after,) = fed.budget("test", epsilon=3.0, delta=0.01).values()
        assert main(["budget", *cli, "--dataset", "test", "--epsilon", "3", "--delta", "0.01"]) == 0
        budget_text = capsys.readouterr().out
        assert main(["describe", *cli, "--epsilon", "3", "--delta", "0.01"]) == 0
        describe_text = capsys.readouterr().out
    assert after["releases"] == fits and after["epsilon_spent"] > 0 and after["mu_spent"] == 0.0
    left = {x["query"]["protocol"]: int(x["releases"]) for x in after["left"]}
    assert left["histogram"] == 0 and left["paper"] == 0 and left["boyd"] == 0
    row = budget_rows({"s0": after}, epsilon=3.0, delta=0.01)[0]
    assert row["validations_left"]["histogram"] == "0"
    # the site's accountant at the request's delta, by the bound of epsilon_spent: 0.01 < 0.05 never gives less
    assert row["epsilon_spent_at_request_delta"] == after["epsilon_at_delta"] >= after["epsilon_spent"] > 0
    assert "paper 0, histogram 0, boyd 0" in budget_text and "paper 0, histogram 0, boyd 0" in describe_text
    assert f"({fits} releases)" in describe_text


def test_recommend_lists_only_what_the_policies_accept(tmp_path, five_sites, pki, helpers, capsys):
    assert main(["recommend", "--sensitivity", "0.19", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed and all(r["delta"] <= 0.01 and r["epsilon"] <= 10 for r in listed)  # the default policy
    assert main(["recommend", "--sensitivity", "0.19", "--max-delta", "1", "--json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert any(r["delta"] > 0.05 for r in everything)  # the study has larger ones
    _, addresses, _ = five_sites
    (tmp_path / "t").write_text(helpers.TOKEN)
    lines = []
    for k, a in enumerate(addresses[:2]):
        lines += ["[[sites]]", f'name = "s{k}"', f'address = "{a}"', 'token_file = "t"', f'ca_file = "{pki.ca_cert}"', ""]
    (tmp_path / "f.toml").write_text("\n".join(lines))
    assert main(["recommend", "--sensitivity", "0.19", "--federation", str(tmp_path / "f.toml"), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [r for r in everything if r["delta"] <= 0.05]  # the sites' max_delta is 0.05


def test_upload_messages_are_serialized_from_the_arrays_as_protobuf_would():
    # The survivor upload serializes its SurvivorChunk messages straight from the released arrays (no message
    # objects, nothing built for the whole upload): the bytes must be what the generated code makes, for
    # chunk sizes across the varint's length boundaries and arrays that end mid-chunk; arrays share messages
    # (each full but the last).
    import numpy as np

    from analyst.protocols.paper.wire import survivor_chunks

    rng = np.random.default_rng(2)
    arrays = [np.sort(rng.normal(size=k)) for k in (1, 15, 17, 2049, 40_000)]
    for size in (1, 16, 2048, 16_384, 65_536):
        chunks = survivor_chunks(arrays, size)
        assert not isinstance(chunks, list)  # made as they are sent
        joined = np.concatenate(arrays)
        expected = [pb.SurvivorChunk(scores=joined[i:i + size].tobytes()).SerializeToString()
                    for i in range(0, joined.size, size)]
        got = list(chunks)
        assert got == expected
        parsed = np.concatenate([np.frombuffer(pb.SurvivorChunk.FromString(m).scores, "<f8") for m in got])
        np.testing.assert_array_equal(parsed, np.concatenate(arrays))


def test_the_upload_header_shares_the_first_message_of_scores_which_stays_no_larger_than_the_others():
    # The header (segments of every site) starts the first message: protobuf parses the concatenation as one
    # SurvivorChunk with both fields, and that message carries fewer scores by the header's size. A header as
    # large as a message goes on its own.
    import numpy as np

    from analyst.protocols.paper.wire import survivor_chunks

    arrays = [np.sort(np.random.default_rng(k).normal(size=700)) for k in range(3)]
    header = pb.SurvivorChunk(header=pb.SurvivorHeader(session_id="s", score_class=pb.SCORE_CLASS_NEGATIVES, n=2100,
                                                       segments=[pb.ReleaseInfo(site="x" * 300)]))
    first = header.SerializeToString()
    for size, alone in ((1024, False), (256, False), (8, True)):
        got = list(survivor_chunks(arrays, size, first=first))
        messages = [pb.SurvivorChunk.FromString(m) for m in got]
        assert messages[0].header == header.header and not any(m.HasField("header") for m in messages[1:])
        assert (messages[0].scores == b"") == alone
        header_scores = -(-len(first) // 8)  # the room the header takes in the first message
        assert len(messages) == (1 + -(-2100 // size) if alone else -(-(2100 + header_scores) // size))
        assert max(len(m) for m in got) <= 8 * size + 16 or alone
        parsed = np.concatenate([np.frombuffer(m.scores, "<f8") for m in messages])
        np.testing.assert_array_equal(parsed, np.concatenate(arrays))
