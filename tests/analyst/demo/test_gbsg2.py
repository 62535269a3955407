"""GBSG2 demo data: outcome definition, exclusions, split and the fitted model."""

import numpy as np
import pandas as pd
import statsmodels.api as sm
from lifelines.datasets import load_gbsg2

from analyst.demo.gbsg2 import FEATURES, OUTCOME, prepare_gbsg2


def test_outcome_exclusions_and_split():
    raw = load_gbsg2()
    d = prepare_gbsg2(seed=7)
    censored_early = int(((raw.time <= 730) & (raw.cens == 0)).sum())
    assert d.n_excluded == censored_early
    assert len(d.train) + len(d.test) == len(raw) - censored_early
    assert abs(len(d.train) / (len(d.train) + len(d.test)) - 0.6) < 0.01
    assert len(d.sites) == 5
    assert sum(len(s) for s in d.sites) == len(d.test)
    assert max(len(s) for s in d.sites) - min(len(s) for s in d.sites) <= 1
    assert pd.concat(d.sites).sort_values(list(d.test.columns)).reset_index(drop=True).equals(
        d.test.sort_values(list(d.test.columns)).reset_index(drop=True))
    # outcome is "no recurrence or death within 730 days"; positives are the event-free patients
    kept = raw[(raw.time > 730) | (raw.cens == 1)]
    assert d.train[OUTCOME].sum() + d.test[OUTCOME].sum() == int((kept.time > 730).sum())


def test_model_matches_an_independent_binomial_glm():
    d = prepare_gbsg2(seed=3)
    X = sm.add_constant(d.train[list(FEATURES)].astype(float))
    glm = sm.GLM(d.train[OUTCOME], X, family=sm.families.Binomial()).fit()
    assert np.isclose(d.intercept, glm.params["const"], rtol=1e-6)
    for f in FEATURES:
        assert np.isclose(d.coefficients[f], glm.params[f], rtol=1e-5, atol=1e-9)


def test_subset_and_determinism():
    a, b = prepare_gbsg2(n_patients=300, seed=1), prepare_gbsg2(n_patients=300, seed=1)
    assert a.test.equals(b.test)
    assert len(a.train) + len(a.test) + a.n_excluded == 300
