"""All or nothing across sites: no site is charged unless every site will answer, and no
charge without a delivered release; holds expire, survive a restart and are returned on refusal.

Real TLS site servers on loopback (in-process, or ``dsroc-site serve`` subprocesses where they are
killed), real SQLite ledgers, the analyst as a subprocess where it is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import pytest

from analyst.connection import SiteError
from dsroc.v1 import site_pb2 as pb
from site_node.testing import Daemon, running_server

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
C = grpc.StatusCode


def _site(root, name, frame, pki, helpers, *, budget=200.0, max_epsilon=10.0, site=None):
    return helpers.write_site(root / name, name, frame, pki, site=site,
                              policy={"budget_epsilon": budget, "max_epsilon": max_epsilon})


def _ledger(config: Path) -> tuple[int, int]:
    """(releases, unexpired holds) in a site's ledger file, read directly."""
    with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
        releases = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        holds = db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]
    return releases, holds


def _release_ids(config: Path) -> set[str]:
    with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
        return {r[0] for r in db.execute("SELECT release_id FROM releases")}


@pytest.fixture
def two_sites(tmp_path, pki, helpers):
    """Two site configs (s0 generous, s1 with a budget of epsilon 3 and max 3 per release)."""
    frames = helpers.site_frames(seed=21)[:2]
    return [_site(tmp_path, "s0", frames[0], pki, helpers), _site(tmp_path, "s1", frames[1], pki, helpers,
                                                                  budget=3.0, max_epsilon=3.0)]


@pytest.mark.parametrize("protocol", ["histogram", "paper"])
def test_a_site_out_of_budget_charges_no_site(two_sites, pki, helpers, protocol):
    """Before: s1 out of budget, the validation failed, but the healthy s0 was charged."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(p)) for p in two_sites]
        with helpers.federation([servers[1].bound_address], pki) as fed:  # spend s1's budget alone
            fed.validate("test", "y", score="pred", epsilon=3.0, delta=0.05, protocol="histogram", n_bins=10,
                         spacing="equal")
        assert _ledger(two_sites[1]) == (1, 0)
        with helpers.federation([s.bound_address for s in servers], pki) as fed:
            with pytest.raises(SiteError) as err:
                fed.validate("test", "y", score="pred", epsilon=2.0, delta=0.01, protocol=protocol)
        assert err.value.site == "s1" and err.value.code == C.RESOURCE_EXHAUSTED
        assert "nothing was released or charged at any site" in err.value.message
        assert _ledger(two_sites[0]) == (0, 0)  # not charged, and its hold cancelled at once
        assert _ledger(two_sites[1]) == (1, 0)


def test_a_budget_that_fits_the_first_stage_only_charges_no_site(two_sites, pki, helpers):
    """Before: the quantile grid's two stages were held one after the other, so s1 was charged the first
    stage and then refused the second (and s0 was charged for a grid nobody used). The first stage holds both.
    After a release at epsilon 2.5, s1's budget of epsilon 3 fits the first stage at epsilon 3 (composed: about
    1.8 at delta 0.05) but not both (about 3.3)."""
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in two_sites]
        with helpers.federation(addresses[1:], pki) as alone:
            alone.validate("test", "y", score="pred", epsilon=2.5, delta=0.01, n_bins=10, spacing="equal")
        with helpers.federation(addresses, pki) as fed:
            with pytest.raises(SiteError) as err:
                fed.validate("test", "y", score="pred", epsilon=3.0, delta=0.01, spacing="quantile")
    assert err.value.site == "s1" and err.value.code == C.RESOURCE_EXHAUSTED
    assert "nothing was released or charged at any site" in err.value.message
    assert [_ledger(p) for p in two_sites] == [(0, 0), (1, 0)]


@pytest.mark.parametrize("labels", ["one class", "three patients"])
def test_a_dataset_no_histogram_can_use_is_refused_before_any_charge(tmp_path, pki, helpers, labels):
    """Before: a one-class or 3-patient dataset was charged (epsilon 4.62), then the CLI failed."""
    frames = helpers.site_frames(seed=22)[:2]
    bad = frames[1].assign(y=0) if labels == "one class" else frames[1].iloc[:3]
    paths = [_site(tmp_path, "s0", frames[0], pki, helpers), _site(tmp_path, "s1", bad, pki, helpers)]
    checked = subprocess.run([sys.executable, "-m", "site_node", "check", "--config", str(paths[1])],
                             capture_output=True, text=True, env=ENV)
    assert checked.returncode == 1 and "a class has fewer than q = 5 patients" in checked.stdout
    assert "no problems found" not in checked.stdout
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(p)) for p in paths]
        with helpers.federation([s.bound_address for s in servers], pki) as fed:
            with pytest.raises(SiteError) as err:
                fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, protocol="histogram")
    assert err.value.site == "s1" and err.value.code == C.PERMISSION_DENIED
    assert "privacy level" in err.value.message and "each class of a histogram" in err.value.message
    assert _ledger(paths[0]) == (0, 0) and _ledger(paths[1]) == (0, 0)


def _histogram_hold(session, epsilon, hold_seconds, delta=1e-5):
    def prepare(conn):
        return pb.PrepareRequest(histogram=pb.HistogramRequest(
            session_id=session.session_ids[conn.name], epsilon=epsilon, delta=delta, n_bins=10),
            hold_seconds=hold_seconds)
    return session.hold("histogram release", prepare)


def _histogram_release(session, epsilon, delta=1e-5):
    def release(conn, held):
        return conn.call("ReleaseHistogram", pb.HistogramRequest(
            session_id=session.session_ids[conn.name], epsilon=epsilon, delta=delta, n_bins=10, reservation_id=held))
    return release


def test_a_site_down_between_prepare_and_commit(two_sites, pki, helpers):
    """s1 goes down after holding: s0 releases (charged, delivered, replayable free); s1 charges nothing
    and its hold, kept in its ledger across the restart, returns to its budget when it expires."""
    with running_server(two_sites[0]) as s0:
        s1 = running_server(two_sites[1])
        address = s1.__enter__().bound_address
        try:
            with helpers.federation([s0.bound_address, address], pki, retries=0) as fed:
                with fed.session("test", "y", score="pred") as session:
                    holds = _histogram_hold(session, 1.0, 3.0)
                    assert all(holds.values()) and _ledger(two_sites[1]) == (0, 1)
                    s1.__exit__(None, None, None)  # down between prepare and commit
                    s1 = None
                    with pytest.raises(SiteError) as err:
                        session.commit("histogram release", holds, _histogram_release(session, 1.0))
                    assert err.value.site == "s1" and err.value.code == C.UNAVAILABLE
                    assert "s0 released and charged their part" in err.value.message
                    # s0's release was delivered, and the same request replays it at no charge
                    again = session.connections[0].call("ReleaseHistogram", pb.HistogramRequest(
                        session_id=session.session_ids["s0"], epsilon=1.0, delta=1e-5, n_bins=10))
                    assert again.repeated and {again.release_id} == _release_ids(two_sites[0])
        finally:
            if s1 is not None:
                s1.__exit__(None, None, None)
    assert _ledger(two_sites[0]) == (1, 0)
    assert _ledger(two_sites[1]) == (0, 1)  # still held after the daemon stopped
    with running_server(two_sites[1]) as back:  # restarted: the hold counts until it expires
        with helpers.federation([back.bound_address], pki) as fed:
            (held,) = fed.budget("test").values()
            assert held["reservations"] == 1 and held["epsilon_spent"] > 0 and held["releases"] == 0
            time.sleep(3.2)
            (after,) = fed.budget("test").values()
    assert after["reservations"] == 0 and after["epsilon_spent"] == 0.0 and after["releases"] == 0


def test_a_hold_survives_a_restart_and_is_used_once(two_sites, pki, helpers):
    with running_server(two_sites[1]) as srv:
        with helpers.federation([srv.bound_address], pki) as fed:
            session = fed.session("test", "y", score="pred")
            holds = _histogram_hold(session, 2.0, 0.0, 0.05)  # the site's default: 60 s at most
            (budget,) = fed.budget("test").values()
    assert _ledger(two_sites[1]) == (0, 1)
    with running_server(two_sites[1]) as srv:
        with helpers.federation([srv.bound_address], pki) as fed, fed.session("test", "y", score="pred") as session:
            # Another release that would fit without the hold is refused: the hold counts as spent.
            with pytest.raises(SiteError) as err:
                _histogram_hold(session, 2.5, 0.0, 0.05)
            assert err.value.code == C.RESOURCE_EXHAUSTED and "held by validations in progress" in err.value.message
            (reply,) = session.commit("histogram release", holds, _histogram_release(session, 2.0, 0.05))
            assert not reply.repeated
            (after,) = fed.budget("test").values()
            assert after["reservations"] == 0 and after["releases"] == 1
            assert after["epsilon_spent"] == pytest.approx(budget["epsilon_spent"], rel=1e-9)
            with pytest.raises(SiteError) as used:  # a hold is used once: another release with it is refused
                session.connections[0].call("ReleaseHistogram", pb.HistogramRequest(
                    session_id=session.session_ids["s0"], epsilon=2.0, delta=0.05, n_bins=20,
                    reservation_id=holds["s0"]))
            assert used.value.code == C.FAILED_PRECONDITION and "unknown, used or expired" in used.value.message
    assert _ledger(two_sites[1]) == (1, 0)


_HOLD_AND_WAIT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from analyst import Federation, SiteConfig
    from dsroc.v1 import site_pb2 as pb
    addresses, ca, token = sys.argv[1].split(","), Path(sys.argv[2]), sys.argv[3]
    fed = Federation([SiteConfig(name=f"s{k}", address=a, token=token, ca_file=ca) for k, a in enumerate(addresses)])
    session = fed.session("test", "y", score="pred")
    session.hold("histogram release", lambda c: pb.PrepareRequest(histogram=pb.HistogramRequest(
        session_id=session.session_ids[c.name], epsilon=1.0, delta=1e-5, n_bins=10), hold_seconds=3.0))
    print("HELD", flush=True)
    time.sleep(120)
""")


def test_the_analyst_killed_between_prepare_and_commit_charges_nothing(two_sites, pki, helpers, tmp_path):
    script = tmp_path / "hold.py"
    script.write_text(_HOLD_AND_WAIT)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(p)) for p in two_sites]
        proc = subprocess.Popen([sys.executable, str(script), ",".join(s.bound_address for s in servers),
                                 str(pki.ca_cert), helpers.TOKEN], stdout=subprocess.PIPE, text=True, env=ENV)
        try:
            assert proc.stdout.readline().strip() == "HELD"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert [_ledger(p) for p in two_sites] == [(0, 1), (0, 1)]
        time.sleep(3.2)
        assert [_ledger(p) for p in two_sites] == [(0, 0), (0, 0)]
        with helpers.federation([s.bound_address for s in servers], pki) as fed:
            for name, b in fed.budget("test").items():
                assert b["releases"] == 0 and b["reservations"] == 0 and b["epsilon_spent"] == 0.0, name


# ---------------------------------------------------------------------------------------- randomized failures

_RUN = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    from analyst import Federation, SiteConfig
    from analyst.connection import SiteError
    from dsroc.v1 import site_pb2 as pb
    addresses, ca, token = sys.argv[1].split(","), Path(sys.argv[2]), sys.argv[3]
    kind, epsilon, pause, hold = sys.argv[4], float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    fed = Federation([SiteConfig(name=f"s{k}", address=a, token=token, ca_file=ca) for k, a in enumerate(addresses)],
                     retries=0, timeout=20)
    session = fed.session("test", "y", score="pred")
    print("OPENED", flush=True)
    try:

        def request(conn, held):
            sid = session.session_ids[conn.name]
            if kind == "histogram":
                return pb.HistogramRequest(session_id=sid, epsilon=epsilon, delta=1e-5, n_bins=10, reservation_id=held)
            return pb.BoydRequest(session_id=sid, epsilon=epsilon, delta=1e-5, reservation_id=held)

        holds = session.hold(kind, lambda c: pb.PrepareRequest(**{kind: request(c, "")}, hold_seconds=hold))
        print("HELD", flush=True)
        time.sleep(pause)  # a slow analyst: kills land between prepare and commit too

        printing = threading.Lock()  # the sites answer in parallel threads: one whole line each

        def release(conn, held):
            r = conn.call("ReleaseHistogram" if kind == "histogram" else "ReleaseBoydStatistics", request(conn, held))
            with printing:
                print("DELIVERED", conn.name, r.release_id, flush=True)
            return r

        session.commit(kind, holds, release)
        print("DONE", flush=True)
        session.close()
    except SiteError as exc:
        print("FAILED", exc.site, exc.code.name, flush=True)
        print(exc.message.replace(chr(10), " "), flush=True)
        session.close()
        sys.exit(3)
""")
HOLD = 15.0


def _daemon(config: Path) -> Daemon:
    """``dsroc-site serve`` of one config in a subprocess on a free loopback port."""
    return Daemon(config, args=["--listen", "127.0.0.1:0"]).wait_serving()


def _failure_runs(tmp_path, pki, helpers, runs: int, seed: int) -> dict:
    """``runs`` validations over three daemons with random kill -9 (analyst or site) and refusals injected.

    Returns the counts; asserts: no release delivered without a charge, no charge in a run that did
    not get every site's hold, every charge not delivered (the analyst or site killed after the charge
    was final) replays free with its release id, and no hold outlives its expiry.
    """
    rng = random.Random(seed)
    frames = helpers.site_frames(seed=23)[:3]
    # sessions of killed analysts stay open until they expire
    configs = [_site(tmp_path, f"s{k}", f, pki, helpers, max_epsilon=1.0 if k == 1 else 10.0,
                     site={"max_sessions": 128, "max_sessions_per_analyst": 128}) for k, f in enumerate(frames)]
    script = tmp_path / "run.py"
    script.write_text(_RUN)
    daemons = [_daemon(c) for c in configs]
    log = []
    try:
        for run in range(runs):
            injected = ("none", "refusal", "kill analyst", "kill site")[run % 4]
            kind = rng.choice(("histogram", "boyd"))
            epsilon = round((1.5 if injected == "refusal" else 0.5) + 0.001 * run, 3)  # s1 refuses above 1
            pause = rng.uniform(0.0, 0.3)
            proc = subprocess.Popen([sys.executable, str(script), ",".join(d.address for d in daemons),
                                     str(pki.ca_cert), helpers.TOKEN, kind, str(epsilon), str(pause), str(HOLD)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
            if proc.stdout.readline().strip() != "OPENED":
                raise AssertionError(f"run {run}: the analyst did not open its sessions: {proc.communicate()}")
            killed = None
            if injected.startswith("kill"):
                time.sleep(rng.uniform(0.0, pause + 0.1))
                if injected == "kill analyst":
                    proc.send_signal(signal.SIGKILL)
                    killed = "analyst"
                else:
                    victim = rng.randrange(len(daemons))
                    daemons[victim].kill()
                    killed = f"s{victim}"
            out, err = proc.communicate(timeout=120)  # stderr: tracebacks, if any, for the assertions' messages
            lines = [line.split() for line in out.splitlines()]
            log.append({"run": run, "kind": kind, "epsilon": epsilon, "injected": injected, "killed": killed,
                        "held": ["HELD"] in lines, "done": ["DONE"] in lines,
                        "delivered": {(w[1], w[2]) for w in lines if w and w[0] == "DELIVERED"}})
            assert injected != "none" or log[-1]["done"], out + err
            assert injected != "refusal" or (["FAILED", "s1", "PERMISSION_DENIED"] in lines and not log[-1]["held"])
            for k, d in enumerate(daemons):
                if d.proc.poll() is not None:
                    daemons[k] = _daemon(configs[k])  # restarted on the same folder
        time.sleep(HOLD + 0.5)
        charged = {}
        for k, config in enumerate(configs):
            with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
                for release_id, kind, request in db.execute("SELECT release_id, kind, request FROM releases"):
                    charged[(f"s{k}", release_id)] = (kind, json.loads(request)["epsilon"])
                assert db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone() \
                    == (0,)
        delivered = set().union(*(r["delivered"] for r in log))
        assert delivered <= set(charged), "a release was delivered without a charge"
        by_request = {(r["kind"], r["epsilon"]): r for r in log}
        recovered = 0
        with helpers.federation([d.address for d in daemons], pki) as fed, \
                fed.session("test", "y", score="pred") as session:
            for (site, release_id), (kind, epsilon) in charged.items():
                run = by_request[(kind, epsilon)]
                assert run["held"], f"run {run['run']}: charged at {site} without every site's hold"
                if (site, release_id) in run["delivered"]:
                    continue
                assert run["killed"], f"run {run['run']}: charged at {site}, not delivered, nothing killed"
                conn = session.connections[int(site[1:])]
                sid = session.session_ids[site]
                again = (conn.call("ReleaseHistogram", pb.HistogramRequest(session_id=sid, epsilon=epsilon,
                                                                            delta=1e-5, n_bins=10))
                         if kind == "histogram" else
                         conn.call("ReleaseBoydStatistics", pb.BoydRequest(session_id=sid, epsilon=epsilon,
                                                                           delta=1e-5)))
                assert again.repeated and again.release_id == release_id  # delivered now, at no charge
                recovered += 1
        for k, config in enumerate(configs):  # the replays charged nothing
            assert {rid for s, rid in charged if s == f"s{k}"} == _release_ids(config)
    finally:
        for d in daemons:
            d.kill()
    return {"runs": runs, "charges": len(charged), "delivered in the run": len(delivered),
            "delivered by a free replay": recovered,
            "runs with a charge at some sites only": sum(
                1 for r in log if r["held"] and 0 < len({s for s, _ in r["delivered"]}) < 3)}


def test_randomized_failures_never_charge_without_a_release(tmp_path, pki, helpers):
    counts = _failure_runs(tmp_path, pki, helpers, runs=4, seed=1)  # one of each injection
    assert counts["charges"] == counts["delivered in the run"] + counts["delivered by a free replay"]


@pytest.mark.slow
def test_randomized_failures_never_charge_without_a_release_100_runs(tmp_path, pki, helpers):
    counts = _failure_runs(tmp_path, pki, helpers, runs=100, seed=2)
    print(counts)
    assert counts["charges"] == counts["delivered in the run"] + counts["delivered by a free replay"]


def test_a_site_down_after_a_charged_release_is_not_told_nothing_was_charged(two_sites, pki, helpers):
    """Before: a site down at the second release's hold (the quantile grid's second stage) made the error say
    "nothing was released or charged at any site" although both sites had charged the first release."""
    with running_server(two_sites[0]) as s0:
        s1 = running_server(two_sites[1])
        address = s1.__enter__().bound_address
        try:
            with helpers.federation([s0.bound_address, address], pki, retries=0) as fed:
                with fed.session("test", "y", score="pred") as session:
                    session.commit("histogram release", _histogram_hold(session, 0.5, 3.0),
                                   _histogram_release(session, 0.5))
                    s1.__exit__(None, None, None)  # down before the next release's hold
                    s1 = None
                    with pytest.raises(SiteError) as err:
                        _histogram_hold(session, 1.0, 3.0)
        finally:
            if s1 is not None:
                s1.__exit__(None, None, None)
    assert err.value.site == "s1" and err.value.code == C.UNAVAILABLE
    assert "nothing was" not in err.value.message
    assert "charged so far: s0 1 release at epsilon 0.5, s1 1 release at epsilon 0.5" in err.value.message
    assert [_ledger(p) for p in two_sites] == [(1, 0), (1, 0)]  # what the message says, and s0's new hold returned


def test_ctrl_c_after_the_first_stage_says_what_each_site_charged_and_returns_the_holds(
        two_sites, pki, helpers, tmp_path, capsys, monkeypatch):
    """Before: Ctrl-C printed a KeyboardInterrupt traceback and said nothing of the first stage, charged at every
    site. Now: exit 130, one line naming each site's charge, which equals its ledger's, and the second stage's
    holds cancelled (not left to expire)."""
    import analyst.cli.validate as validate_cli
    from analyst.cli import main
    from dsroc.histogram.stages import laplace_two_stage_plan

    holds_seen = []

    def progress(step, site, message):  # Ctrl-C once the second stage's holds are made, before its commit
        if site is None and "hold its budget" in message:
            holds_seen.append(step)
            if len(holds_seen) == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(validate_cli, "progress_printer", lambda verbose=False: progress)
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in two_sites]
        (tmp_path / "token").write_text(helpers.TOKEN)
        lines = []
        for k, a in enumerate(addresses):
            lines += ["[[sites]]", f'name = "s{k}"', f'address = "{a}"', 'token_file = "token"',
                      f'ca_file = "{pki.ca_cert}"', ""]
        (tmp_path / "federation.toml").write_text("\n".join(lines))
        rc = main(["validate", "--federation", str(tmp_path / "federation.toml"), "--dataset", "test", "--outcome",
                   "y", "--score", "pred", "--epsilon", "2", "--delta", "0.01", "--out", str(tmp_path / "report")])
    # the analyst's lines: the in-process sites log JSON lines there too once a dsroc-site command ran in this process
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith('{"time"')]
    first = laplace_two_stage_plan(2.0, 0.01).epsilon1
    assert rc == 130 and not (tmp_path / "report").exists()
    assert err[-1] == (f"dsroc: interrupted; charged so far: s0 1 release at epsilon {first:.4g}, s1 1 release at "
                       f"epsilon {first:.4g} (the same request replays them at no charge)")
    assert "Traceback" not in "\n".join(err)
    assert [_ledger(p) for p in two_sites] == [(1, 0), (1, 0)]  # one release each, no hold left
    for config in two_sites:  # each ledger's release is the first stage at the epsilon the line gives
        with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
            assert db.execute("SELECT epsilon FROM releases").fetchall() == [(pytest.approx(first, rel=1e-12),)]
