"""dsroc as a Flower app through a real SuperLink and two SuperNodes on loopback, beside the same sites' daemons.

The Flower run makes the releases; the same validation through the daemons then asks the same requests, which
each site replays from its ledger at no charge: every statistic must be equal, and nothing charged twice.
"""

from __future__ import annotations

import json
import math
from time import perf_counter

import pytest

from analyst import Federation

REQUEST = dict(dataset="sample", outcome="y", score="pred", epsilon=5.0, delta=0.01)
#: What differs by design between two runs of the same releases: the timings and the engine's note, and in each
#: release whether it was new and the budget spent when it was answered.
PER_RUN, PER_RELEASE = {"timing", "engine"}, {"repeated", "epsilon_spent"}


def statistics(report: dict):
    """A report without what differs by design between two runs of the same releases."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in PER_RELEASE}
        return [strip(v) for v in x] if isinstance(x, list) else x
    return strip({k: v for k, v in report.items() if k not in PER_RUN})


def assert_same(a, b, path="") -> None:
    """Equal structure and values, floats to 1e-12 (relative)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.mark.slow
def test_a_validation_through_flower_equals_the_daemons_and_is_charged_once(deployment, tmp_path):
    start = perf_counter()
    run = deployment.run(tmp_path / "flower", **REQUEST)
    flower_wall = perf_counter() - start
    report = tmp_path / "flower" / "report.json"
    assert report.exists(), run.stdout[-4000:] + run.stderr[-2000:]
    through_flower = json.loads(report.read_text())
    assert through_flower["engine"]["name"] == "flower" and through_flower["protocol"] == "histogram"
    assert through_flower["sites"] == deployment.sites
    assert all(not r["repeated"] for r in through_flower["privacy"].values())  # the Flower run made the releases

    with Federation.from_file(deployment.federation_file) as fed:
        spent = dict(fed.budget(REQUEST["dataset"]))
        start = perf_counter()
        through_daemons = fed.validate(**REQUEST).to_dict()
        daemon_seconds = perf_counter() - start
        after = fed.budget(REQUEST["dataset"])
        start = perf_counter()  # the anchor: a validation with new releases (another epsilon) through the daemons
        fresh = fed.validate(**{**REQUEST, "epsilon": 4.0}).to_dict()
        fresh_seconds = perf_counter() - start
    assert all(not r["repeated"] for r in fresh["privacy"].values())
    # the same requests: every site replayed its releases, charging nothing
    assert all(r["repeated"] for r in through_daemons["privacy"].values())
    for site in deployment.sites:
        assert spent[site]["epsilon_spent"] > 0 and spent[site]["releases"] > 0
        assert after[site]["epsilon_spent"] == pytest.approx(spent[site]["epsilon_spent"], abs=1e-12)
        assert after[site]["releases"] == spent[site]["releases"]
    assert_same(statistics(through_flower), statistics(json.loads(json.dumps(through_daemons))))
    engine = through_flower["engine"]
    print(f"\nflower: flwr run {flower_wall:.1f} s, validation {engine['wall_seconds']:.1f} s, per site "
          f"{engine['sites']}; daemons: new releases {fresh_seconds:.2f} s, replayed {daemon_seconds:.2f} s")


@pytest.mark.slow
def test_a_refusal_travels_back_through_flower_and_charges_nothing(deployment, tmp_path):
    with Federation.from_file(deployment.federation_file) as fed:
        before = {s: b["epsilon_spent"] for s, b in fed.budget(REQUEST["dataset"]).items()}
    run = deployment.run(tmp_path / "refused", dataset="no-such-dataset", outcome="y", score="pred", epsilon=1.0,
                         delta=0.01)
    assert not (tmp_path / "refused" / "report.json").exists()
    text = run.stdout + run.stderr
    assert "no-such-dataset" in text and ("NOT_FOUND" in text or "INVALID_ARGUMENT" in text), text[-3000:]
    with Federation.from_file(deployment.federation_file) as fed:
        after = {s: b["epsilon_spent"] for s, b in fed.budget(REQUEST["dataset"]).items()}
    assert after == before
