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
    text = res.summary(verbose=True)
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
    assert main(["describe", "--federation", str(tmp_path / "federation.toml")]) == 0
    described = capsys.readouterr().out
    assert "survival (--time): time edges 90, 180," in described and "time columns ['time']" in described
    out = tmp_path / "report"
    assert main(common + ["--out", str(out), "--time", "time", "--horizon", "720", "--n-bins", "5",
                          "--time-edges", "180,360,720,1080,1440"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["analysis"] == "survival" and report["horizon"] == 720
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


def test_the_survival_summary_fits_one_screen(validated):
    _, _, _, res = validated
    lines = str(res).splitlines()
    assert len(lines) <= 25 + 2  # 25, and the per-site pooling of these five sites in two lines
    v = res.detail.validation
    text = "\n".join(lines)
    assert f"{res.auc:.3f}" in text and f"Harrell {v.harrell_c.value:.3f}" in text and "Uno (tau 720)" in text
    # Uno's truncation and the grouped times say how, not what went wrong: notes, not warnings
    assert any(n.startswith("Uno's C truncated") for n in res.notes) and "Warnings" not in text
    assert "times are grouped" in res.summary(verbose=True)


def test_the_survival_figures_have_one_line_titles_and_privacy_in_the_caption(validated):
    from analyst.display import pyplot

    _, _, _, res = validated
    for fig in (res.survival_display().figure(), res.plot()):
        assert "\n" not in fig._suptitle.get_text() and "events by 720" in fig._suptitle.get_text()
        assert fig._supxlabel.get_text().startswith("Privacy: survival release")
        assert all("\n" not in ax.get_title() for ax in fig.axes)
        pyplot().close(fig)
