"""Survival validation end to end: five real TLS site daemons, one survival release each, the summed estimates.

The numbers are checked against independent computations on the pooled per-patient data: lifelines (Harrell's C,
Kaplan-Meier) and a brute-force IPCW AUC written here, within what the binning and the release's noise allow; the
budget each site charged against the release's epsilon; refusals before anything is charged.
"""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pandas as pd
import pytest

lifelines = pytest.importorskip("lifelines")
from lifelines.utils import concordance_index  # noqa: E402

from analyst import Federation, SiteConfig  # noqa: E402
from analyst.protocols.histogram.survival import SurvivalOptions  # noqa: E402
from analyst.result.report import write_report  # noqa: E402
from site_node.interceptors.auth import hash_token  # noqa: E402
from site_node.testing import running_server  # noqa: E402

TOKEN = "survival-analyst-token"
GRID = [90.0 * k for k in range(1, 23)]  # every 90 days to 1 980
HORIZON = 720.0
N_SITES, N = 5, 600


def cohort(seed: int = 3) -> pd.DataFrame:
    """Weibull event times in days with a proportional-hazards covariate, uniform censoring (~40 %); ``risk`` the
    model's risk of an event by the horizon (the true one, a little shrunk)."""
    rng = np.random.default_rng(seed)
    n = N_SITES * N
    x = rng.normal(size=n)
    t = 900.0 * rng.weibull(1.3, n) * np.exp(-0.8 * x / 1.3)
    c = rng.uniform(200.0, 2600.0, n)
    time = np.round(np.minimum(t, c), 1)
    event = (t <= c).astype(int)
    risk = 1.0 - np.exp(-((HORIZON / 900.0) ** 1.3) * np.exp(0.7 * x))
    return pd.DataFrame({"x": x, "risk": risk, "time": time, "event": event})


# Uno's C rules of the sites' policies: every site reports it up to tau 1800 at most; site s2 only where the released
# censoring survival is at least 0.5 (the others: no minimum). Censoring is uniform on (200, 2600): G(720) ~ 0.8,
# G(1800) ~ 0.35, so the default tau (the horizon) is untouched and a tau of 1800 is truncated.
MAX_TAU, STRICT, MIN_G = 1800.0, "s2", 0.5


def write_site(directory, name, frame, pki):
    directory.mkdir(parents=True, exist_ok=True)
    frame.to_csv(directory / "data.csv", index=False)
    path = directory / "site.toml"
    path.write_text(f"""
[site]
name = "{name}"
state_dir = "state"

[tls]
cert = "{pki.server_cert}"
key = "{pki.server_key}"

[policy]
protocols = ["histogram"]
max_epsilon = 10.0
max_delta = 0.05
budget_epsilon = 20.0
budget_delta = 0.05
survival_time_edges = {json.dumps(GRID)}
survival_max_tau = {MAX_TAU}
survival_min_censoring_survival = {MIN_G if name == STRICT else 0.0}

[analysts.tester]
token_sha256 = "{hash_token(TOKEN)}"
datasets = ["*"]

[datasets.surv]
path = "data.csv"
outcomes = ["event"]
scores = ["risk"]
score_range = [0.0, 1.0]
time_columns = ["time"]
""")
    return path


@pytest.fixture(scope="module")
def sites(tmp_path_factory, pki):
    root = tmp_path_factory.mktemp("survival-sites")
    data = cohort()
    frames = [data.iloc[k::N_SITES].reset_index(drop=True) for k in range(N_SITES)]
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(write_site(root / f"s{k}", f"s{k}", f, pki)))
                   for k, f in enumerate(frames)]
        fed = stack.enter_context(Federation([SiteConfig(name=f"s{k}", address=s.bound_address, token=TOKEN,
                                                         ca_file=pki.ca_cert) for k, s in enumerate(servers)]))
        yield data, fed


def ipcw_auc(time, event, risk, t):
    """Cumulative/dynamic AUC at t by brute force over pairs: cases (events by t) weighted 1 / G(T-), controls T > t."""
    order = np.lexsort((1 - event, time))  # events before censorings at a tie
    g_left, g_now, at_risk = np.empty(time.size), 1.0, time.size
    for i in order:
        g_left[i] = g_now
        if event[i] == 0:
            g_now *= 1.0 - 1.0 / at_risk
        at_risk -= 1
    case = (time <= t) & (event == 1)
    w = 1.0 / g_left[case]
    rc, r0 = risk[case], risk[time > t]
    wins = (rc[:, None] > r0[None, :]) + 0.5 * (rc[:, None] == r0[None, :])
    return float((w[:, None] * wins).sum() / (w.sum() * r0.size))


@pytest.fixture(scope="module")
def validated(sites):
    data, fed = sites
    before = fed.budget("surv")
    res = fed.validate("surv", "event", score="risk", epsilon=4.0, delta=1e-6, time="time", horizon=HORIZON,
                       draws=60)
    return data, fed, before, res


def test_the_survival_validation_matches_the_pooled_references(validated):
    data, _, _, res = validated
    time, event, risk = (data[c].to_numpy() for c in ("time", "event", "risk"))
    v = res.detail.validation
    assert res.analysis == "survival" and res.time == "time" and res.horizon == HORIZON
    # every patient is in the release, the censored ones too (noise: a few patients per summed cell)
    assert abs(res.n - time.size) < 40
    assert abs(res.n1 - ((time <= HORIZON) & (event == 1)).sum()) < 30
    # the discrimination: binned in 90-day bins and 10 score bins, plus noise; within the interval and close
    reference_auc = ipcw_auc(time, event, risk, HORIZON)
    assert res.auc_ci[0] - 0.01 < reference_auc < res.auc_ci[1] + 0.01 and abs(res.auc - reference_auc) < 0.03
    harrell = concordance_index(time, -risk, event)
    assert abs(v.harrell_c.value - harrell) < 0.03 and v.harrell_c.lower < v.harrell_c.value < v.harrell_c.upper
    km = lifelines.KaplanMeierFitter().fit(time, event).survival_function_at_times(HORIZON).iloc[0]
    assert abs(v.observed.value - (1.0 - km)) < 0.02
    # the risks' log cumulative hazard is 0.7 x where the truth's is 0.8 x: calibrated in the mean, slope 8/7
    assert 0.85 < v.oe.value < 1.2
    # the site's noise is fresh each run: a 95 % interval would miss the true slope in one run of twenty, so ask
    # for the slope within 3.5 of its SEs (one run in ~2 000) and well above the flat 0
    slope = v.calibration_slope
    assert abs(slope.value - 0.8 / 0.7) < 3.5 * slope.se and slope.lower < slope.value < slope.upper and slope.value > 0.6
    assert res.calibration is not None and len(res.calibration.observed) >= 3
    assert set(v.pooled) >= {"auc", "harrell_c", "oe"} and res.heterogeneity.auc.sites == N_SITES
    assert res.brier.includes.startswith("sampling and the privacy noise")


def test_each_site_charged_the_release_epsilon_once(validated):
    _, fed, before, res = validated
    after = fed.budget("surv")
    for name in fed.names:
        assert after[name]["releases"] == before[name].get("releases", 0) + 1
        assert math.isclose(res.privacy[name].epsilon, 4.0)
        assert after[name]["epsilon_spent"] > before[name].get("epsilon_spent", 0.0)


def test_the_report_files_text_and_json(validated, tmp_path, helpers):
    _, _, _, res = validated
    d = res.to_dict()
    helpers.check_schema(d)
    assert d["schema_version"] == 2 and d["analysis"] == "survival" and d["detail"]["analysis"] == "survival"
    assert d["detail"]["auc"]["value"] == pytest.approx(res.auc)
    text = str(res)
    for words in ("Harrell's C", "Uno's C", "Integrated Brier", "events by 720", "censored before it",
                  "grouped proportional-hazards"):
        assert words in text
    page = res._repr_html_()
    assert "Harrell's C" in page and "Uno's C" in page and "cumulative/dynamic AUC(720)" in page
    assert set(res.to_frame("calibration").columns) >= {"observed", "mean_predicted"}
    auc_t = res.to_frame("auc_time")
    assert (auc_t["lower"] <= auc_t["auc"]).all() and (auc_t["auc"] <= auc_t["upper"]).all()
    km = res.to_frame("kaplan_meier")
    assert km["survival"].is_monotonic_decreasing and len(km) == len(GRID) + 1
    paths = write_report(res, tmp_path / "report")
    assert paths["survival"].stat().st_size > 20_000
    json.loads(paths["json"].read_text())


def test_bad_requests_are_refused_before_any_charge(sites):
    data, fed = sites
    before = fed.budget("surv")
    with pytest.raises(ValueError, match="horizon 2500 lies beyond the last finite time edge"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="time", horizon=2500)
    with pytest.raises(ValueError, match="protocol 'paper' cannot validate a survival outcome"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="time", horizon=720,
                     protocol="paper")
    with pytest.raises(ValueError, match="horizon is required"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="time")
    with pytest.raises(ValueError, match="horizon and SurvivalOptions apply to a survival validation"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, horizon=720)
    with pytest.raises(ValueError, match="give the time column too"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, options=SurvivalOptions(horizon=720))
    from analyst.connection import SiteError

    with pytest.raises(SiteError, match="time"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="x", horizon=720)
    with pytest.raises((SiteError, ValueError), match="time edge"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="time",
                     options=SurvivalOptions(horizon=720, time_edges=(100.0, 720.0)))
    with pytest.raises(ValueError, match="auc_times: 5000 lies beyond the release's last finite time edge"):
        fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="time",
                     options=SurvivalOptions(horizon=720, auc_times=(365.0, 5000.0)))
    with pytest.raises(ValueError, match="auc_times must be a non-empty list of positive finite times"):
        SurvivalOptions(horizon=720, auc_times=(-1.0,))
    after = fed.budget("surv")
    assert all(after[n]["epsilon_spent"] == before[n].get("epsilon_spent", 0.0) for n in fed.names)


def _ledgers(fed):
    """What each site's ledger says of the dataset: spent epsilon, releases and holds."""
    return {n: (b.get("epsilon_spent", 0.0), b.get("releases", 0), b.get("reservations", 0))
            for n, b in fed.budget("surv").items()}


def test_a_tau_beyond_a_sites_largest_is_refused_before_any_hold(sites):
    """Attack: Uno's C asked at a tau beyond what a site's policy allows (survival_max_tau). Refused naming tau, the
    site (of those at the smallest limit, the first by name) and the key, before any site holds or charges anything:
    the ledgers unchanged."""
    _, fed = sites
    before = _ledgers(fed)
    for tau in (1800.5, 5000.0):
        with pytest.raises(ValueError, match=rf"tau: {tau:g} lies beyond site s0's largest truncation time of Uno's C "
                                             r"1800 \(policy: survival_max_tau\); give tau <= 1800"):
            fed.validate("surv", "event", score="risk", epsilon=1.0, delta=1e-6, time="time",
                         options=SurvivalOptions(horizon=720, tau=tau, draws=20))
    assert _ledgers(fed) == before


def _life_table_g(counts: np.ndarray) -> np.ndarray:
    """Censoring survival at each time bin's right edge from (K, 2, J) counts, one bin at a time (the events of a bin
    count half at risk of its censorings; noisy counts per time point clipped at 0, as the estimator does)."""
    per_bin = np.maximum(counts.sum(axis=2), 0.0)
    g, out = 1.0, []
    for k in range(per_bin.shape[0]):
        at_risk = per_bin[k:].sum() - 0.5 * per_bin[k, 1]
        g *= 1.0 - min(per_bin[k, 0], at_risk) / at_risk if at_risk > 0 else 1.0
        out.append(g)
    return np.array(out)


def _expected_tau(g: np.ndarray, points: np.ndarray, tau: float, minimum: float) -> float:
    counted = [k for k in range(points.size) if points[k] < tau]
    if not counted or g[counted[-1]] >= minimum:
        return tau
    kept = [k for k in counted if g[k] >= minimum]
    return float(points[len(kept)]) if kept else float("nan")


def test_uno_c_is_truncated_where_the_released_censoring_survival_falls_below_a_sites_minimum(sites):
    """Site s2 reports Uno's C only where G >= 0.5: at tau 1800 (allowed) the summed release's G is about 0.35, so
    tau moves to the first time point where G falls below 0.5, computed here from the released counts; s2's own Uno's
    C needs its own G >= 0.5 there. Post-processing of the charged release: one release per site, as any validation."""
    _, fed = sites
    before = _ledgers(fed)
    res = fed.validate("surv", "event", score="risk", epsilon=2.0, delta=1e-6, time="time",
                       options=SurvivalOptions(horizon=720, tau=MAX_TAU, draws=20))
    v, releases = res.detail.validation, res.detail.releases
    summed = sum(r.release.counts[0].astype(float) for r in releases.values())
    points = np.asarray(GRID + [2.0 * GRID[-1] - GRID[-2]])
    expected = _expected_tau(_life_table_g(summed), points, MAX_TAU, MIN_G)
    assert expected < MAX_TAU and v.tau == expected
    (note,) = [n for n in v.notes if f"truncated at tau = {expected:g} instead of 1800" in n]
    assert "below the minimum 0.5 (policy: survival_min_censoring_survival)" in note
    assert any(f"Uno's C (tau {expected:g})" in line for line in str(res).splitlines())
    own = _expected_tau(_life_table_g(releases[STRICT].release.counts[0].astype(float)), points, expected, MIN_G)
    strict = next(s for s in v.sites if s.site == STRICT)
    assert np.isfinite(strict.uno_c.value) == (own == expected)
    assert any(n.startswith(f"site {STRICT}: its own Uno's C is not reported") for n in v.notes) == (own != expected)
    assert all(np.isfinite(s.uno_c.value) for s in v.sites if s.site != STRICT)  # no minimum of their own
    after = _ledgers(fed)
    assert all(after[n][1] == before[n][1] + 1 for n in fed.names)  # the one release each, nothing more


def test_budget_and_describe_count_the_survival_validations_that_fit(sites):
    from analyst.cli.sites import left_counts

    from dsroc.v1 import site_pb2 as pb

    _, fed = sites
    budget, info = fed.budget("surv", epsilon=4.0, delta=1e-6), fed.describe(epsilon=4.0, delta=1e-6)
    for conn, name in zip(fed.connections, fed.names):
        # A survival validation's release by default: counts without the risk sums (SurvivalOptions.risk_sums).
        (alone,) = conn.call("Budget", pb.BudgetRequest(dataset="surv", queries=[pb.ReleaseQuery(
            protocol="survival", epsilon=4.0, delta=1e-6)])).budget.left
        assert not alone.refused and alone.releases >= 1
        for b in (budget[name], info[name]["datasets"][0]["budget"]):
            (asked,) = [x["query"] for x in b["left"] if x["query"]["protocol"] == "survival"]
            assert asked["score_sums"] is False and asked["epsilon"] == 4.0 and asked["delta"] == 1e-6
            assert left_counts(b)["survival"] == str(alone.releases)


def test_the_cli_validates_a_survival_outcome(sites, pki, tmp_path, capsys):
    from analyst.cli import main

    _, fed = sites
    (tmp_path / "analyst.token").write_text(TOKEN + "\n")
    lines = []
    for s in fed.sites:
        lines += ["[[sites]]", f'name = "{s.name}"', f'address = "{s.address}"', 'token_file = "analyst.token"',
                  f'ca_file = "{pki.ca_cert}"', ""]
    (tmp_path / "federation.toml").write_text("\n".join(lines))
    common = ["validate", "--federation", str(tmp_path / "federation.toml"), "--dataset", "surv", "--outcome",
              "event", "--score", "risk", "--epsilon", "2", "--delta", "1e-6", "--quiet"]
    assert main(common + ["--out", str(tmp_path / "a"), "--time", "time"]) == 2
    assert "--horizon is required with --time" in capsys.readouterr().err
    assert main(common + ["--out", str(tmp_path / "b"), "--horizon", "720"]) == 2
    assert "--horizon applies to a survival validation only" in capsys.readouterr().err
    assert main(common + ["--out", str(tmp_path / "c"), "--time", "time", "--horizon", "720", "--a0", "0.6"]) == 2
    assert "--a0: not an option of a survival validation" in capsys.readouterr().err
    before = _ledgers(fed)
    for flags, message in ((["--auc-times", "360,720"], "--auc-times applies to a survival validation only"),
                           (["--time", "time", "--horizon", "720", "--auc-times", "360,-5"],
                            "auc_times must be a non-empty list of positive finite times"),
                           (["--time", "time", "--horizon", "720", "--auc-times", ","],
                            "auc_times must be a non-empty list of positive finite times"),
                           (["--time", "time", "--horizon", "720", "--auc-times", "360,5000"],
                            "auc_times: 5000 lies beyond the release's last finite time edge 1980")):
        assert main(common + ["--out", str(tmp_path / "d"), *flags]) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit) as parsed:  # argparse's own error: usage and exit status 2
        main(common + ["--out", str(tmp_path / "d"), "--time", "time", "--horizon", "720", "--auc-times", "1e3,x"])
    assert parsed.value.code == 2
    assert "argument --auc-times: expected comma-separated numbers, got '1e3,x'" in capsys.readouterr().err
    assert _ledgers(fed) == before  # each refused before anything was held
    assert main(["describe", "--federation", str(tmp_path / "federation.toml")]) == 0
    described = capsys.readouterr().out
    assert "survival (--time): time edges 90, 180," in described and "time columns ['time']" in described
    assert described.count("; Uno's C at tau <= 1800") == N_SITES  # every site's survival_max_tau
    assert described.count("Uno's C where the censoring survival >= 0.5") == 1  # s2's minimum only
    out = tmp_path / "report"
    assert main(common + ["--out", str(out), "--time", "time", "--horizon", "720", "--n-bins", "5",
                          "--time-edges", "180,360,720,1080,1440", "--auc-times", "1080, 360,720"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["analysis"] == "survival" and report["horizon"] == 720
    assert report["detail"]["auc_curve"]["times"] == [360, 720, 1080]  # the times asked for, in order
    assert report["detail"]["auc_curve"]["values"][1] == pytest.approx(report["detail"]["auc"]["value"], abs=1e-12)
    assert report["detail"]["time_edges"][1:-1] == [180, 360, 720, 1080, 1440] and len(report["detail"]["score_edges"]) == 6
    assert (out / "survival.png").read_bytes()[:4] == b"\x89PNG"


def test_survival_views_refuse_a_binary_result_and_draw_without_loading_matplotlib_early(helpers):
    import subprocess
    import sys

    binary = helpers.results.histogram_result_of()
    assert binary.analysis == "binary"
    with pytest.raises(ValueError, match="not a survival validation"):
        binary.survival_display()
    with pytest.raises(ValueError, match="needs a survival validation"):
        binary.to_frame("auc_time")
    code = ("import sys, analyst, analyst.display.survival, analyst.protocols.histogram.survival; "
            "print('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() \
        == "False"


def test_the_sites_uno_rules_combine_to_the_strictest():
    """uno_rule from the policies: the horizon beyond the smallest survival_max_tau gives that tau (noted); the summed
    release needs the largest minimum, each site its own; no rule (0) changes nothing."""
    from analyst.protocols.histogram.survival import uno_rule

    from dsroc.v1 import site_pb2 as pb

    policies = {"b": pb.Policy(survival_max_tau=900.0, survival_min_censoring_survival=0.1),
                "a": pb.Policy(survival_max_tau=600.0), "c": pb.Policy(survival_min_censoring_survival=0.3)}
    capped = uno_rule(policies, SurvivalOptions(horizon=720))
    assert capped.tau == 600.0 and capped.min_censoring == 0.3
    assert dict(capped.site_min_censoring) == {"a": 0.0, "b": 0.1, "c": 0.3}
    assert capped.notes == ("Uno's C is truncated at site a's largest tau 600 (policy: survival_max_tau), before the "
                            "horizon 720",)
    assert uno_rule(policies, SurvivalOptions(horizon=500)).tau == 500.0
    assert uno_rule(policies, SurvivalOptions(horizon=720, tau=600.0)).notes == ()
    with pytest.raises(ValueError, match="tau: 601 lies beyond site a's largest"):
        uno_rule(policies, SurvivalOptions(horizon=720, tau=601.0))
    free = uno_rule({"a": pb.Policy(), "b": pb.Policy()}, SurvivalOptions(horizon=720, tau=5000.0))
    assert free.tau == 5000.0 and free.min_censoring == 0.0 and free.notes == ()
