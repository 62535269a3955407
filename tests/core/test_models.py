"""The declarative GLM score model and the data-derived model sensitivity."""

import numpy as np
import pytest
import statsmodels.api as sm

from dsroc import GlmModel, model_sensitivity


@pytest.mark.parametrize("link, sm_link", [("logit", sm.families.links.Logit()), ("probit", sm.families.links.Probit())])
def test_glm_model_predicts_like_statsmodels(link, sm_link):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 2))
    y = (rng.random(500) < 1 / (1 + np.exp(-(X @ [1.0, -0.5])))).astype(float)
    fit = sm.GLM(y, sm.add_constant(X), family=sm.families.Binomial(link=sm_link)).fit()
    model = GlmModel(link, fit.params[0], {"a": fit.params[1], "b": fit.params[2]})
    np.testing.assert_allclose(model.predict({"a": X[:, 0], "b": X[:, 1], "unused": X[:, 0]}), fit.predict(sm.add_constant(X)), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(link="log", intercept=0), "link"),
        (dict(link="logit", intercept=np.inf), "intercept"),
        (dict(link="logit", intercept=0, coefficients={"a": np.nan}), "coefficient 'a'"),
    ],
)
def test_glm_model_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GlmModel(**kwargs)


def test_glm_model_names_missing_or_bad_columns():
    model = GlmModel("logit", 0.1, {"age": 0.2})
    with pytest.raises(ValueError, match="'age' is not in the data"):
        model.predict({"size": np.ones(3)})
    with pytest.raises(ValueError, match="column 'age' has 1 missing"):
        model.predict({"age": np.array([1.0, np.nan])})


def test_sensitivity_of_a_linear_model_is_the_largest_coefficient_times_bin_width():
    rng = np.random.default_rng(1)
    X = np.c_[rng.uniform(0, 10, 400), rng.uniform(0, 1, 400), rng.integers(0, 2, 400)]
    beta = np.array([0.05, 2.0, 0.3])
    calls = []

    def predict(Z):
        calls.append(len(Z))
        return Z @ beta

    est = model_sensitivity(predict, X, n_bins=10, feature_names=["a", "b", "flag"])
    width = (X.max(0) - X.min(0)) / 10
    assert est.per_feature["a"] == pytest.approx(0.05 * width[0])
    assert est.per_feature["b"] == pytest.approx(2.0 * width[1])
    assert est.per_feature["flag"] == pytest.approx(0.3)  # binary: its two levels are adjacent bins
    assert est.feature == "flag" and est.value == pytest.approx(0.3)
    assert "not a formal bound" in est.note
    assert len(calls) == 1 + 2 * X.shape[1]  # O(n p): 2p vectorised calls plus the base evaluation


def test_sensitivity_validation():
    with pytest.raises(ValueError, match="non-finite"):
        model_sensitivity(lambda Z: Z[:, 0], np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match="n_bins"):
        model_sensitivity(lambda Z: Z[:, 0], np.ones((3, 1)), n_bins=1)
