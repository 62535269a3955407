"""Populations: dataset entries over the same patients share one budget, history and caps, and the budget is
compared exactly, never with slack."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from dsroc import analytic_gaussian_sigma, gdp_delta, gdp_epsilon, gdp_mu
from dsroc.v1 import site_pb2 as pb
from site_node.cli import main
from site_node.config import ConfigError, source_identity
from site_node.testing import running_server

from ..conftest import make_config

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES
C = grpc.StatusCode
TWO_ENTRIES = {"again": {"path": "data/test.csv", "outcomes": ["y"], "scores": ["pred"]}}


def test_two_entries_over_one_file_share_one_budget(make_site_config, client_cls):
    # Attack: each entry had its own full budget, so epsilon 2 + 2 was spent on the
    # same patients against a budget of 2, and the two answers could be differenced.
    config = make_site_config(datasets=TWO_ENTRIES, policy={"max_epsilon": 2.0, "budget_epsilon": 2.0})
    assert config.datasets["test"].population == config.datasets["again"].population
    with running_server(config) as srv:
        c = client_cls(srv)
        first, values, _ = c.release(c.open(dataset="test"), NEG, epsilon=2.0)
        assert first.mu_charged > 0
        with pytest.raises(grpc.RpcError) as refused:
            c.release(c.open(dataset="again"), NEG, epsilon=1.9)
        assert refused.value.code() == C.RESOURCE_EXHAUSTED and "remaining about epsilon" in refused.value.details()
        # The same question through the other entry is the same release: identical values, no charge.
        again, same, _ = c.release(c.open(dataset="again"), NEG, epsilon=2.0)
        assert again.repeated and again.mu_charged == 0 and again.release_id == first.release_id
        np.testing.assert_array_equal(values, same)
        budgets = {d.name: d.budget for d in c.Describe(pb.DescribeRequest()).datasets}
        assert budgets["test"].releases == budgets["again"].releases == 1
        assert budgets["again"].epsilon_spent == pytest.approx(gdp_epsilon(first.mu, 0.05), rel=1e-9)
        c.close()


def test_caps_are_per_population(make_site_config, client_cls):
    # One analyst model per population (max_models = 1): a second model through the other entry is refused.
    config = make_site_config(datasets={"again": {"path": "data/test.csv", "outcomes": ["y"],
                                                  "model_columns": ["age", "size"]}})
    model = lambda b: pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[pb.Coefficient(name="age", value=b)])  # noqa: E731
    with running_server(config) as srv:
        c = client_cls(srv)
        c.open(dataset="test", model=model(0.01))
        with pytest.raises(grpc.RpcError) as refused:
            c.open(dataset="again", model=model(0.02))
        assert refused.value.code() == C.RESOURCE_EXHAUSTED and "population" in refused.value.details()
        c.close()


def test_explicit_population_joins_separate_files(tmp_path, client_cls):
    policy = {"max_epsilon": 2.0, "budget_epsilon": 2.0, "budget_delta": 0.01}
    entry = {"outcomes": ["y"], "scores": ["pred"]}
    make_config(tmp_path / "s")
    shutil.copy(tmp_path / "s" / "data" / "test.csv", tmp_path / "s" / "data" / "copy.csv")
    joined = make_config(tmp_path / "s", policy=policy, datasets={
        "test": {"path": "data/test.csv", **entry, "population": "cohort"},
        "copy": {"path": "data/copy.csv", **entry, "population": "cohort"}})
    make_config(tmp_path / "t")
    shutil.copy(tmp_path / "t" / "data" / "test.csv", tmp_path / "t" / "data" / "copy.csv")
    # declared as two cohorts (a byte copy is served only with both populations named)
    separate = make_config(tmp_path / "t", policy=policy, datasets={
        "test": {"path": "data/test.csv", **entry, "population": "cohort-a"},
        "copy": {"path": "data/copy.csv", **entry, "population": "cohort-b"}})
    assert joined.datasets["test"].population == joined.datasets["copy"].population == "cohort"
    assert separate.datasets["test"].population != separate.datasets["copy"].population
    for config, expected in ((joined, C.RESOURCE_EXHAUSTED), (separate, None)):
        with running_server(config) as srv:
            c = client_cls(srv)
            c.release(c.open(dataset="test"), NEG, epsilon=2.0)
            try:
                c.release(c.open(dataset="copy"), NEG, epsilon=1.0)
                outcome = None
            except grpc.RpcError as exc:
                outcome = exc.code()
            assert outcome == expected
            c.close()


def test_one_source_cannot_be_split_into_two_populations(tmp_path):
    with pytest.raises(ConfigError, match="datasets.again.population: reads the same source"):
        make_config(tmp_path / "s", datasets={"again": {"path": "data/test.csv", "outcomes": ["y"],
                                                        "population": "elsewhere"}})
    with pytest.raises(ConfigError, match="population: must be a non-empty name"):
        make_config(tmp_path / "t", datasets={"x": {"path": "data/test.csv", "outcomes": ["y"], "population": ""}})


def test_source_identity_of_sql_entries(tmp_path):
    config = make_config(tmp_path / "s", frames={}, datasets={
        "a": {"url": "postgresql://u:secret@db/x", "table": "cohort", "outcomes": ["y"]},
        "b": {"url": "postgresql://u:other@db/x", "table": "cohort", "outcomes": ["y"]},
        "c": {"url": "postgresql://u@db/x", "query": "SELECT *\n  FROM cohort", "outcomes": ["y"]},
        "d": {"url": "postgresql://u@db/x", "query": "SELECT * FROM cohort", "outcomes": ["y"]}})
    ids = {name: source_identity(ds) for name, ds in config.datasets.items()}
    assert ids["a"] == ids["b"] == "sql:postgresql://u@db/x#table=cohort"  # no password in the identity
    assert ids["c"] == ids["d"] != ids["a"]
    assert all("secret" not in ds.population for ds in config.datasets.values())


def test_check_reports_entries_that_look_like_the_same_patients(tmp_path, capsys):
    config = make_config(tmp_path / "s", datasets=TWO_ENTRIES)
    shutil.copy(config.datasets["test"].path, tmp_path / "s" / "data" / "copy.csv")
    frame = __import__("pandas").read_csv(config.datasets["test"].path)
    frame.sample(frac=1.0, random_state=3).to_csv(tmp_path / "s" / "data" / "shuffled.csv", index=False)
    text = (tmp_path / "s" / "site.toml")
    text.write_text(
        '[site]\nname = "s"\n[datasets.test]\npath = "data/test.csv"\noutcomes = ["y"]\n'
        '[datasets.again]\npath = "data/test.csv"\noutcomes = ["y"]\n'
        '[datasets.copy]\npath = "data/copy.csv"\noutcomes = ["y"]\n'
        '[datasets.shuffled]\npath = "data/shuffled.csv"\noutcomes = ["y"]\n')
    assert main(["check", "--config", str(text)]) == 1
    out = capsys.readouterr().out
    assert "population of datasets test, again: one privacy budget" in out
    assert "datasets 'test' and 'copy' may hold the same patients (byte-identical files)" in out
    assert "datasets 'test' and 'shuffled' may hold the same patients (identical column" in out


def test_composed_delta_never_exceeds_the_budget(make_site_config, client_cls):
    # Attack: with a relative slack of 1e-9 on mu, two releases whose composed mu is
    # 5e-10 above the budget's were accepted, and the composed delta exceeded the configured total.
    eps_b, delta_b = 1.0, 1e-5
    config = make_site_config(policy={"max_epsilon": eps_b, "max_delta": delta_b, "budget_epsilon": eps_b,
                                      "budget_delta": delta_b})
    mu_b = 1.0 / analytic_gaussian_sigma(eps_b, delta_b, 1.0)
    mu1 = 1.0 / analytic_gaussian_sigma(0.6, delta_b, 1.0)
    eps2 = gdp_epsilon(np.sqrt((mu_b * (1 + 5e-10)) ** 2 - mu1**2), delta_b)
    mu2 = 1.0 / analytic_gaussian_sigma(eps2, delta_b, 1.0)
    assert gdp_delta(gdp_mu([mu1, mu2]), eps_b) > delta_b  # together they exceed the budget
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.release(s, NEG, epsilon=0.6, delta=delta_b)
        try:
            c.release(s, NEG, epsilon=eps2, delta=delta_b)
        except grpc.RpcError as exc:
            assert exc.code() == C.RESOURCE_EXHAUSTED
        mus = [1.0 / e["sigma"] for r in srv.ledger.history() for e in r["events"]]
        assert gdp_delta(gdp_mu(mus), eps_b) <= delta_b
        c.close()


def test_concurrent_releases_over_two_entries_never_exceed_the_budget(make_site_config, client_factory):
    config = make_site_config(datasets=TWO_ENTRIES, policy={"max_epsilon": 2.0, "budget_epsilon": 2.0})
    with running_server(config, max_workers=16) as srv:
        def release(i):
            c = client_factory(srv)
            try:
                return c.release(c.open(dataset=("test", "again")[i % 2]), NEG, epsilon=2.0 - 1e-3 * i)[0].mu_charged
            except grpc.RpcError as exc:
                return exc.code()

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(release, range(8)))
        assert sum(isinstance(r, float) and r > 0 for r in results) == 1
        assert results.count(C.RESOURCE_EXHAUSTED) == 7
        status = srv.ledger.budget(config.datasets["test"].population, config.policy)
        assert status.releases == 1 and status.delta_spent <= config.policy.budget_delta


def _look_alike(tmp_path, kind, declared):
    """A site with the default entry ``test`` (CSV or SQLite table) and a look-alike of it of ``kind``."""
    import os
    import sqlite3

    import pandas as pd

    base = make_config(tmp_path / "s")
    data = tmp_path / "s" / "data"
    entry = {"outcomes": ["y"], "scores": ["pred"]}
    if kind in ("hard link", "copy"):
        (os.link if kind == "hard link" else shutil.copyfile)(data / "test.csv", data / "other.csv")
        datasets = {"test": {"path": "data/test.csv", **entry}, "other": {"path": "data/other.csv", **entry}}
    else:
        with sqlite3.connect(data / "cohort.db") as db:
            pd.read_csv(base.datasets["test"].path).to_sql("cohort", db, index=False)
            db.execute("CREATE VIEW cohort_view AS SELECT * FROM cohort")
        other = ({"url": "sqlite:///data/cohort.db", "table": "cohort_view"} if kind == "SQL view" else
                 {"url": f"sqlite:///{data}/../data/cohort.db?mode=ro", "table": "cohort"})
        datasets = {"test": {"url": "sqlite:///data/cohort.db", "table": "cohort", **entry}, "other": {**other, **entry}}
    if declared:
        datasets["test"]["population"], datasets["other"]["population"] = "cohort-a", "cohort-b"
    return make_config(tmp_path / "s", frames={}, datasets=datasets)


@pytest.mark.parametrize("kind", ["hard link", "copy", "SQL view", "differently spelled SQLite URL"])
def test_serve_and_check_refuse_an_undeclared_look_alike_of_a_dataset(tmp_path, capsys, client_cls, kind):
    # Attack: each look-alike entry had a full budget of its own over the same patients;
    # check only warned and serve started anyway.
    config = _look_alike(tmp_path, kind, declared=False)
    assert config.datasets["test"].population != config.datasets["other"].population
    with pytest.raises(ConfigError, match="datasets 'test' and 'other' may hold the same patients"):
        with running_server(config):
            pass
    toml = __import__("tomli_w").dumps
    assert not config.ledger_path.exists()  # refused before any state was made
    path = tmp_path / "s" / "site.toml"
    datasets = {n: {k: (list(v) if isinstance(v, tuple) else str(v) if k == "path" else v)
                    for k, v in vars(d).items() if k in ("path", "url", "table", "outcomes", "scores") and v}
                for n, d in config.datasets.items()}
    path.write_text(toml({"site": {"name": "s"}, "analysts": {}, "datasets": datasets}))
    assert main(["check", "--config", str(path)]) == 1
    assert "may hold the same patients" in capsys.readouterr().out
    declared = _look_alike(tmp_path / "declared", kind, declared=True)  # the administrator said: two cohorts
    with running_server(declared) as srv:
        c = client_cls(srv)
        assert {d.name for d in c.Describe(pb.DescribeRequest()).datasets} == {"test", "other"}
        c.close()
