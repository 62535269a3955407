"""The paper protocol is never confidently wrong on ``dsroc-site init``'s federation: with the paper protocol enabled
and init's default sensitivity rule ('range', Delta 1) a request at epsilon 1 or 5 is refused before any site holds
or charges anything, with the reason and the settings that work; at the setting init's config comment shows
(rule 'value', Delta 0.05) its interval covers the pooled AUC (scipy's Mann-Whitney, computed here from the sites'
files) in at least 9 of 10 runs with fresh noise. Real TLS daemons on loopback."""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analyst import Federation
from site_node.cli.init import init_federation
from site_node.testing import running_server


def _serve_paper(tmp_path, *, sensitivity_value=None, budget=None):
    """init's two sites with "paper" added to their protocols (and, when given, the config comment's 'value' rule
    and a larger budget for repeated runs); yields the federation file and the sites' data."""
    made = init_federation(tmp_path / "fed", 2)
    frames = []
    for site in made.sites:
        text = site.config.read_text()
        assert 'protocols = ["histogram"]' in text and 'sensitivity = "range"' in text
        text = text.replace('protocols = ["histogram"]', 'protocols = ["histogram", "paper"]')
        if sensitivity_value is not None:  # the setting init's comment shows
            assert f"# sensitivity_value = {sensitivity_value}" in text
            text = text.replace('sensitivity = "range"', 'sensitivity = "value"').replace(
                f"# sensitivity_value = {sensitivity_value}", f"sensitivity_value = {sensitivity_value}")
        if budget is not None:
            text = text.replace("budget_epsilon = 20.0", f"budget_epsilon = {budget}")
        site.config.write_text(text)
        frames.append(pd.read_csv(site.dataset))
    return made, frames


@contextlib.contextmanager
def _running(made):
    with contextlib.ExitStack() as stack:
        text = made.federation.read_text()
        for site in made.sites:  # in process on a free port: the federation file points there
            bound = stack.enter_context(running_server(site.config)).bound_address
            text = text.replace(f'"{site.address}"', f'"{bound}"')
        made.federation.write_text(text)
        with Federation.from_file(made.federation) as fed:
            yield fed


def _spent(fed):
    return {n: (b["releases"], b["reservations"]) for n, b in fed.budget("sample").items()}


@pytest.mark.parametrize("epsilon", [1.0, 5.0])
def test_inits_default_rule_is_refused_before_any_charge_with_the_setting_that_works(tmp_path, epsilon):
    made, _ = _serve_paper(tmp_path)
    with _running(made) as fed:
        with pytest.raises(ValueError) as err:
            fed.validate("sample", "y", score="pred", epsilon=epsilon, delta=0.01, protocol="paper")
        assert _spent(fed) == {"site1": (0, 0), "site2": (0, 0)}  # nothing held, nothing charged
    why = " ".join(str(err.value).split())
    assert why.startswith(f"refused: the paper protocol at epsilon {epsilon:g}, delta 0.01")
    assert "sensitivity 1 at site site1: rule 'range'" in why and "towards 0.5 beyond its interval" in why
    # what works: the 'value' rule at most a Delta that init's comment's 0.05 meets, or the histogram protocol
    needed = float(re.search(r"sites whose sensitivity is at most ([0-9.]+)", why).group(1))
    assert 0.05 <= needed < 0.2
    assert "histogram protocol" in why and why.endswith("nothing was released or charged at any site")


def test_the_setting_inits_comment_shows_covers_the_pooled_auc(tmp_path):
    made, frames = _serve_paper(tmp_path, sensitivity_value=0.05, budget=200.0)
    pooled = pd.concat(frames)
    s, y = pooled["pred"].to_numpy(), pooled["y"].to_numpy()
    u = stats.mannwhitneyu(s[y == 1], s[y == 0]).statistic
    truth = u / ((y == 1).sum() * (y == 0).sum())
    covered, runs = {1.0: 0, 5.0: 0}, []
    with _running(made) as fed:
        for k in range(10):  # another epsilon each run: a new release with fresh noise (a repeat is a free replay)
            for base in covered:
                res = fed.validate("sample", "y", score="pred", epsilon=base + 0.01 * k, delta=0.01, protocol="paper")
                assert not any(w.startswith("outside the simulation study") for w in res.warnings)
                runs.append((base + 0.01 * k, res.auc, res.auc_ci))
                covered[base] += res.auc_ci[0] <= truth <= res.auc_ci[1]
    assert 0.6 < truth < 0.7  # init's synthetic model (the 0.648 is one such federation)
    assert min(covered.values()) >= 9, (truth, covered, runs)  # at least 9 of 10 at each epsilon
    assert all(abs(a - truth) < 0.05 for _, a, _ in runs), (truth, runs)
