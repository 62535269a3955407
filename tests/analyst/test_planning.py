"""Planning the histogram protocol's AUC interval before anything is charged (issue 35, item 2): the planned width
against the Hanley-McNeil interval where the noise is negligible, the epsilon search, the refusal of an uninformative
request over real TLS sites (their SQLite ledgers read directly) and ``dsroc recommend --protocol histogram``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analyst.cli import main
from analyst.recommend import PLAN_EPSILONS, histogram_width_plan
from dsroc.histogram.planning import planned_auc_widths
from site_node.testing import running_server


def _hanley_mcneil_width(auc, n0, n1, z=1.959963984540054):
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    return 2 * z * math.sqrt((auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n0 - 1) * (q2 - auc**2)) / (n0 * n1))


def test_without_noise_the_planned_width_is_the_sampling_width():
    """At epsilon 1000 the release is all but exact: the default protocol's interval is the sampling one (within the
    binning's widening) of binormal data of AUC 0.75, 600 patients and 200 events (Hanley and McNeil 1982)."""
    widths = planned_auc_widths(600, 200, 5, 1000.0, auc=0.75, reps=10)
    assert np.median(widths) == pytest.approx(_hanley_mcneil_width(0.75, 400, 200), rel=0.15)
    # the noise widens it: at epsilon 0.5 the same patients' intervals are wider in every replication
    assert np.all(planned_auc_widths(600, 200, 5, 0.5, auc=0.75, reps=10) > widths)


def test_the_plan_names_the_smallest_tried_epsilon_that_is_informative():
    plan = histogram_width_plan(249, 100, 5, 0.5, 0.2, auc=0.72)
    assert not plan.informative and plan.width > 0.2
    assert plan.needed_epsilon is not None and plan.widths[plan.needed_epsilon] <= 0.2
    below = max(e for e in (0.5, *PLAN_EPSILONS) if e < plan.needed_epsilon)
    assert plan.widths[below] > 0.2  # the epsilon just below it was tried and too wide
    assert f"epsilon {plan.needed_epsilon:g} would make it" in str(plan)
    assert histogram_width_plan(249, 100, 5, plan.needed_epsilon, 0.2, auc=0.72, bins=()).informative
    # the explicit bin counts at the requested epsilon, the same simulated validations with n_bins asked for
    assert set(plan.by_bins) == {7, 10}
    assert plan.by_bins[10] == np.median(planned_auc_widths(249, 100, 5, 0.5, auc=0.72, reps=10, n_bins=10))
    if plan.best_bins is not None:
        assert plan.by_bins[plan.best_bins] <= 0.9 * plan.width and f"(n_bins={plan.best_bins}: " in str(plan)
    none = histogram_width_plan(60, 10, 3, 1.0, 0.05, max_epsilon=2.0, bins=())
    assert none.needed_epsilon is None and "more patients are needed" in str(none) and max(none.widths) == 2.0


def test_an_uninformative_request_is_refused_before_any_site_holds_anything(tmp_path, pki, helpers):
    frames = helpers.site_frames(seed=3)[:2]
    paths = [helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
    import contextlib

    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in paths]
        with helpers.federation(addresses, pki) as fed:
            with pytest.raises(ValueError) as err:
                fed.validate("test", "y", score="pred", epsilon=0.5, delta=1e-5, max_auc_width=0.2,
                             planned=(249, 100, 0.72))
            assert [helpers.ledger_counts(p) for p in paths] == [(0, 0)] * 2
            message = str(err.value)
            assert message.startswith("max_auc_width: the answer would be uninformative: 249 patients (100 events) "
                                      "over 2 sites, AUC 0.72: median AUC interval width")
            assert "would make it" in message and "nothing was held or charged at any site" in message
            # planned at a size that is informative at this epsilon: the validation runs (and is charged)
            res = fed.validate("test", "y", score="pred", epsilon=5.0, delta=1e-5, max_auc_width=0.3,
                               planned=(800, 400, 0.8))
    assert res.auc_ci[1] - res.auc_ci[0] < 0.3 and all(helpers.ledger_counts(p)[0] == 2 for p in paths)
    with pytest.raises(ValueError, match="max_auc_width and planned go together"):
        fed.validate("test", "y", score="pred", epsilon=5.0, delta=1e-5, max_auc_width=0.3)


def test_recommend_lists_the_width_at_each_epsilon(capsys):
    assert main(["recommend", "--protocol", "histogram", "--patients", "249", "--events", "100", "--sites", "5",
                 "--width", "0.2", "--auc", "0.72", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = histogram_width_plan(249, 100, 5, 0.1, 0.2, auc=0.72)
    assert out["needed_epsilon"] == plan.needed_epsilon
    assert [w["median_width"] for w in out["widths"]] == pytest.approx(list(plan.widths.values()))
    assert main(["recommend", "--protocol", "histogram", "--patients", "249"]) == 2
    assert "--events, --width: needed with --protocol histogram" in capsys.readouterr().err
