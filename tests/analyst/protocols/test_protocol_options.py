"""Protocols as strategies: options travel as the protocol's typed object, wrong ones are refused before any site
is asked (the federation's only site does not exist, so asking it would fail differently)."""

import pytest

from analyst import Federation, HistogramOptions, PaperOptions, SiteConfig
from analyst.protocols import PROTOCOLS, get_protocol


@pytest.fixture
def nowhere(pki):
    with Federation([SiteConfig(name="a", address="127.0.0.1:9", token="t", ca_file=pki.ca_cert)], retries=0) as fed:
        yield fed


def validate(fed, **kwargs):
    return fed.validate("test", "y", score="pred", epsilon=1, delta=1e-5, **kwargs)


def test_each_protocol_has_its_options_type():
    assert set(PROTOCOLS) >= {"histogram", "paper"}
    assert get_protocol("histogram").options_type is HistogramOptions
    assert get_protocol("paper").options_type is PaperOptions and get_protocol("paper").with_sensitivity
    with pytest.raises(ValueError, match="protocol must be 'histogram' or 'paper'"):
        get_protocol("secret")


@pytest.mark.parametrize("kwargs, message", [
    (dict(ci_method="wald"), "ci_method do not apply to the histogram protocol"),
    (dict(protocol="paper", spacing="logit"), "spacing do not apply to the paper protocol"),
    (dict(options=PaperOptions()), "must be a HistogramOptions, got PaperOptions"),
    (dict(options=HistogramOptions(), n_bins=5), "either as options= or as keywords"),
    (dict(protocol="paper", sensitivity=-1.0), "sensitivity"),
])
def test_options_of_another_protocol_are_refused_before_any_site_is_asked(nowhere, kwargs, message):
    with pytest.raises(ValueError, match=message):
        validate(nowhere, **kwargs)


@pytest.mark.parametrize("make, message", [
    (lambda: HistogramOptions(spacing="log"), "spacing must be 'quantile', 'equal' or 'logit'"),
    (lambda: HistogramOptions(n_bins=0), "n_bins must be a positive integer"),
    (lambda: HistogramOptions(scalars=("sum_x",)), "scalars must be among"),
    (lambda: PaperOptions(ci_method="exact"), "ci_method must be 'logit' or 'wald'"),
    (lambda: PaperOptions(a0=1.5), "a0 must lie in"),
])
def test_options_check_their_fields(make, message):
    with pytest.raises(ValueError, match=message):
        make()
