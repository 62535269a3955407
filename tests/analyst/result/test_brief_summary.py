"""The one-screen summary of real validations through five TLS daemons: at most 25 lines, one AUC per model (or the
reason beside a second one), warnings only when something needs attention; the whole text behind verbose."""

from __future__ import annotations

import pytest

from analyst.protocols import HistogramOptions
from analyst.result.brief import BRIEF_LINES, plain


def test_plain_drops_asides_but_keeps_words_made_of_parentheses():
    assert plain("epsilon-DP (discrete Laplace (pure)); every number") == "epsilon-DP; every number"
    assert plain("only the noisy releases are (epsilon, delta)-DP (at the rule); the rest") == (
        "only the noisy releases are (epsilon, delta)-DP; the rest")
    assert plain("survival release (histogram protocol): each site") == "survival release: each site"


@pytest.fixture(scope="module")
def histogram(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        return fed.validate("test", "y", score="pred", epsilon=5, delta=0.01)


def test_a_histogram_validation_fits_one_screen_with_one_auc(histogram):
    res = histogram
    text = str(res)
    lines = text.splitlines()
    assert len(lines) <= BRIEF_LINES and max(len(x) for x in lines) <= 140
    # one AUC of the model: the headline, at three decimals, no binned or resolved AUC beside it
    assert sum("AUC" in x and "0." in x for x in lines) == 1 and f"{res.auc:.3f}" in text
    assert [x.split(")")[0] for x in lines if x.startswith("AUC (")] == [f"AUC ({res.auc_estimator}"]
    # the estimator's 600-character reasoning is a note (how), not a warning: a fine fit warns of nothing
    assert res.notes and res.notes[0].startswith("AUC: the ") and len(res.notes[0]) > 300
    assert not any(w.startswith("AUC: ") for w in res.warnings)
    assert ("Warnings" in text) == bool(res.warnings)
    assert f"{res.calibration.slope.value:.3f}" in text and f"{res.brier.value:.3f}" in text
    full = res.summary(verbose=True)
    assert "AUC (binned)" in full and "Notes (how the estimates were made)" in full and len(full.splitlines()) > 40
    assert res.to_dict()["notes"] == list(res.notes)


def test_the_paper_protocol_states_why_it_gives_a_second_auc(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=5, delta=0.01, protocol="paper")
    lines = str(res).splitlines()
    assert len(lines) <= BRIEF_LINES
    second = next(x for x in lines if x.startswith("AUC (noise-corrected)"))
    assert "includes the release noise" in second


def test_extra_parts_take_a_line_each_and_name_a_different_estimand(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=5, delta=0.01,
                           options=HistogramOptions(by_site=True, decision_curve=True))
    lines = str(res).splitlines()
    assert len(lines) <= BRIEF_LINES + 4
    pooled = next(x for x in lines if x.startswith("AUC pooled across sites"))
    h = res.heterogeneity.auc
    assert f"{h.estimate:.3f}" in pooled and f"I^2 {100 * h.i2:.0f}%" in pooled
    assert any(x.startswith("Decision curve at") for x in lines)
