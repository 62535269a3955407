"""Survival validation under secure aggregation: three real TLS site daemons, one masked round of survival cells.

The summed estimates are checked against the pooled per-patient data (lifelines' Harrell's C and Kaplan-Meier, the
brute-force IPCW AUC of the histogram protocol's test) and against the histogram protocol's run on the same sites;
each site's charge against a binary secagg round of the same (epsilon, delta) over the same sites (the same share and
events: one patient is one count in one cell); a wrong time grid is refused before any hold or charge.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

lifelines = pytest.importorskip("lifelines")
from lifelines.utils import concordance_index  # noqa: E402

# the histogram protocol's test module: its cohort, site files and brute-force AUC (tests import by path here)
_spec = importlib.util.spec_from_file_location("survival_validate",
                                               Path(__file__).with_name("test_survival_validate.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
GRID, HORIZON, TOKEN, cohort, ipcw_auc, write_site = (_base.GRID, _base.HORIZON, _base.TOKEN, _base.cohort,
                                                      _base.ipcw_auc, _base.write_site)

from analyst import Federation, SiteConfig  # noqa: E402
from analyst.connection import SiteError  # noqa: E402
from analyst.protocols.histogram.secagg_rounds import collect_secagg  # noqa: E402
from site_node.cli.init import link_peers  # noqa: E402
from site_node.testing import running_server  # noqa: E402

N_SITES = 3
EPSILON, DELTA = 4.0, 1e-6


@pytest.fixture(scope="module")
def sites(tmp_path_factory, pki):
    root = tmp_path_factory.mktemp("secagg-survival")
    data = cohort(seed=5)
    frames = [data.iloc[k::N_SITES].reset_index(drop=True) for k in range(N_SITES)]
    paths = []
    for k, f in enumerate(frames):
        path = write_site(root / f"s{k}", f"s{k}", f, pki)
        # a binary dataset declared another population (its own budget): the reference charge of a binary round
        # (a copy of the same rows, so both entries declare their populations: serve refuses look-alikes otherwise)
        f.assign(x=-f["x"]).to_csv(root / f"s{k}" / "binary.csv", index=False)
        text = path.read_text().replace("max_epsilon = 10.0", "max_epsilon = 10000.0").replace(
            "budget_epsilon = 20.0", "budget_epsilon = 100000.0").replace(
            "[datasets.surv]\n", '[datasets.surv]\npopulation = "survival cohort"\n')
        path.write_text(text.replace('protocols = ["histogram"]', 'protocols = ["histogram", "secagg"]')
                        + '\n[datasets.bin]\npath = "binary.csv"\noutcomes = ["event"]\nscores = ["risk"]\n'
                          'score_range = [0.0, 1.0]\npopulation = "binary reference"\n')
        paths.append(path)
    link_peers(paths)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(p)) for p in paths]
        fed = stack.enter_context(Federation([SiteConfig(name=f"s{k}", address=s.bound_address, token=TOKEN,
                                                         ca_file=pki.ca_cert) for k, s in enumerate(servers)]))
        yield data, fed


@pytest.fixture(scope="module")
def validated(sites):
    data, fed = sites
    before = fed.budget("surv")
    res = fed.validate("surv", "event", score="risk", epsilon=EPSILON, delta=DELTA, time="time", horizon=HORIZON,
                       protocol="secagg", draws=60)
    return data, fed, before, fed.budget("surv"), res


def test_the_secagg_survival_validation_matches_the_pooled_references_and_the_histogram_protocol(validated):
    data, fed, _, _, res = validated
    time, event, risk = (data[c].to_numpy() for c in ("time", "event", "risk"))
    v = res.detail.validation
    assert res.protocol == "secagg" and res.analysis == "survival" and res.horizon == HORIZON
    cells = (len(GRID) + 1) * 2 * 10  # every patient, the censored ones too, within 4 SDs of the summed noise
    assert abs(res.n - time.size) < 4 * v.count_sd * math.sqrt(cells)
    reference_auc = ipcw_auc(time, event, risk, HORIZON)
    assert res.auc_ci[0] < reference_auc < res.auc_ci[1] and abs(res.auc - reference_auc) < 0.03
    harrell = concordance_index(time, -risk, event)
    assert abs(v.harrell_c.value - harrell) < 0.03 and v.harrell_c.lower < harrell < v.harrell_c.upper
    km = lifelines.KaplanMeierFitter().fit(time, event).survival_function_at_times(HORIZON).iloc[0]
    assert abs(v.observed.value - (1.0 - km)) < 0.03
    # the summed noise is the shares' (3 honest shares): what the validation's intervals carry
    assert v.count_sd == pytest.approx(math.sqrt(N_SITES) * res.privacy["s0"].noise_sd, rel=1e-6)
    hist = fed.validate("surv", "event", score="risk", epsilon=EPSILON, delta=DELTA, time="time", horizon=HORIZON,
                        draws=60, by_site=False)
    assert abs(hist.auc - res.auc) < 0.04 and abs(hist.detail.validation.harrell_c.value - v.harrell_c.value) < 0.03
    assert "only the sum" in res.guarantee and "unavailable by design" in res.summary(verbose=True)
    assert "secure aggregation" in res.to_dict()["detail"]["mechanism"]
    assert res.to_dict()["detail"]["releases"] == {}


def test_each_site_charged_one_round_as_a_binary_round_of_the_same_request(validated):
    _, fed, before, after, res = validated
    with fed.session("bin", "event", score="risk") as s:
        collect_secagg(s, epsilon=EPSILON, delta=DELTA, n_bins=10, spacing="equal")
    binary = fed.budget("bin")
    for name in fed.names:
        assert after[name]["releases"] == before[name].get("releases", 0) + 1
        assert after[name]["reservations"] == 0 and binary[name]["releases"] == 1
        assert after[name]["epsilon_spent"] - before[name].get("epsilon_spent", 0.0) == pytest.approx(
            binary[name]["epsilon_spent"], rel=1e-9)
        # the round, composed alone by the site's accountant at the request's delta: (EPSILON, DELTA)-DP as asked
        assert res.privacy[name].releases == 1 and EPSILON - 1e-5 < res.privacy[name].epsilon <= EPSILON + 1e-9


def test_under_negligible_noise_the_sum_is_the_pooled_cells(sites):
    data, fed = sites
    with fed.session("surv", "event", score="risk", time="time") as s:
        total = collect_secagg(s, epsilon=1000.0, delta=0.01, n_bins=10, spacing="equal", survival_edges=GRID[:11])
    e, k = np.asarray([0.0, *GRID[:11], np.inf]), 12
    assert np.array_equal(total.time_edges, e) and np.allclose(total.edges, np.linspace(0, 1, 11))
    time, event, risk = (data[c].to_numpy() for c in ("time", "event", "risk"))
    brute = np.zeros((k, 2, 10), dtype=np.int64)  # bin k: e_{k-1} < T <= e_k (T = 0 in the first); risk bin [a, b)
    for t, d, r in zip(time, event, risk):
        brute[max(int(np.sum(e < t)), 1) - 1, d, min(int(r * 10), 9)] += 1
    assert np.abs(total.cells.reshape(k, 2, 10) - brute).max() <= 1 and total.noise_sd < 0.2


def test_a_wrong_time_grid_is_refused_before_any_hold_or_charge(sites):
    _, fed = sites
    before = fed.budget("surv")
    with pytest.raises(SiteError, match="time edge"):  # 100 is no edge of the sites' policy grid
        fed.validate("surv", "event", score="risk", epsilon=EPSILON, delta=DELTA, time="time", horizon=HORIZON,
                     protocol="secagg", time_edges=[100.0, HORIZON])
    with pytest.raises(SiteError, match="survival_max_time_bins|time bins"):  # finer than the policy allows
        with fed.session("surv", "event", score="risk", time="time") as s:
            collect_secagg(s, epsilon=EPSILON, delta=DELTA, n_bins=10, spacing="equal",
                           survival_edges=list(np.arange(1, 40) * 45.0))
    with pytest.raises(ValueError, match="risk_sums"):
        fed.validate("surv", "event", score="risk", epsilon=EPSILON, delta=DELTA, time="time", horizon=HORIZON,
                     protocol="secagg", risk_sums=True)
    # Uno's C beyond the sites' survival_max_tau (1800, written by write_site): refused before the round
    with pytest.raises(ValueError, match=r"tau: 2000 lies beyond site s0's largest truncation time of Uno's C 1800 "
                                         r"\(policy: survival_max_tau\)"):
        fed.validate("surv", "event", score="risk", epsilon=EPSILON, delta=DELTA, time="time", horizon=HORIZON,
                     protocol="secagg", tau=2000.0)
    after = fed.budget("surv")
    for name in fed.names:
        for key in ("releases", "reservations", "epsilon_spent"):
            assert after[name].get(key, 0) == before[name].get(key, 0), (name, key)
    assert GRID[7] == HORIZON


def test_a_survival_round_is_refused_on_a_binary_session_and_with_score_sums(sites):
    _, fed = sites
    before = fed.budget("bin")
    with pytest.raises(SiteError, match="no time column") as binary:
        with fed.session("bin", "event", score="risk") as s:
            collect_secagg(s, epsilon=EPSILON, delta=DELTA, n_bins=10, spacing="equal", survival_edges=GRID[:5])
    with pytest.raises(SiteError, match="score_sums false") as sums:
        with fed.session("surv", "event", score="risk", time="time") as s:
            collect_secagg(s, epsilon=EPSILON, delta=DELTA, n_bins=10, spacing="equal", score_sums=True,
                           survival_edges=GRID[:5])
    assert binary.value.code.name == "FAILED_PRECONDITION" and sums.value.code.name == "INVALID_ARGUMENT"
    after = fed.budget("bin")
    assert all(after[n].get("epsilon_spent", 0) == before[n].get("epsilon_spent", 0) for n in fed.names)
