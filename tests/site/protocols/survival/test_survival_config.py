"""The survival keys of a site config: the init template's commented keys, errors naming file and key, and
``dsroc-site check`` naming the rule a time column breaks."""

from __future__ import annotations

import pytest

from site_node.cli import main
from site_node.cli.init import init_site
from site_node.config import ConfigError, load_config

from .conftest import survival_frame


def _uncommented(text: str) -> str:
    """The init template with its survival keys switched on (the sample data gets a time column below)."""
    return (text.replace("# survival_time_edges", "survival_time_edges")
            .replace("# survival_max_time_bins", "survival_max_time_bins")
            .replace("# survival_max_tau = 0.0", "survival_max_tau = 1095.0")
            .replace("# survival_min_censoring_survival = 0.0", "survival_min_censoring_survival = 0.2")
            .replace("# time_columns", "time_columns"))


def test_the_templates_survival_keys_load(tmp_path):
    result = init_site(tmp_path / "s")
    result.config.write_text(_uncommented(result.config.read_text()))
    config = load_config(result.config)
    assert config.policy.survival_time_edges == (180.0, 365.0, 730.0, 1095.0)
    assert config.policy.survival_max_time_bins == 24 and config.datasets["sample"].time_columns == ("time",)
    assert config.policy.survival_max_tau == 1095.0 and config.policy.survival_min_censoring_survival == 0.2
    plain = load_config(init_site(tmp_path / "plain").config).policy
    assert plain.survival_time_edges == ()  # absent: none
    assert plain.survival_max_tau == 0.0 and plain.survival_min_censoring_survival == 0.0  # absent: no limit


@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace("[180.0, 365.0, 730.0, 1095.0]", "[365.0, 180.0]"),
     "policy.survival_time_edges: must be a list of finite, positive, strictly increasing times"),
    (lambda t: t.replace("[180.0, 365.0, 730.0, 1095.0]", "[0.0, 180.0]"), "policy.survival_time_edges: must be"),
    (lambda t: t.replace("[180.0, 365.0, 730.0, 1095.0]", "[180.0, inf]"), "policy.survival_time_edges: must be"),
    (lambda t: t.replace("[180.0, 365.0, 730.0, 1095.0]", '["a year"]'), "policy.survival_time_edges: must be"),
    (lambda t: t.replace("[180.0, 365.0, 730.0, 1095.0]", "365.0"), "policy.survival_time_edges: must be a list"),
    (lambda t: t.replace("survival_max_time_bins = 24", "survival_max_time_bins = 1"),
     "policy.survival_max_time_bins: must be an integer of at least 2"),
    (lambda t: t.replace("survival_max_time_bins = 24", "survival_max_time_bins = 5000"),
     "policy.survival_max_time_bins: must be at most 1000"),
    (lambda t: t.replace("survival_max_tau = 1095.0", "survival_max_tau = -1.0"),
     "policy.survival_max_tau: must be a finite time >= 0 (0: no limit), got -1.0"),
    (lambda t: t.replace("survival_max_tau = 1095.0", "survival_max_tau = inf"),
     "policy.survival_max_tau: must be a finite time >= 0"),
    (lambda t: t.replace("survival_max_tau = 1095.0", 'survival_max_tau = "3 years"'),
     "policy.survival_max_tau: must be a time (0: no limit), got '3 years'"),
    (lambda t: t.replace("survival_min_censoring_survival = 0.2", "survival_min_censoring_survival = 1.0"),
     "policy.survival_min_censoring_survival: must be a probability in [0, 1) (0: no minimum), got 1.0"),
    (lambda t: t.replace("survival_min_censoring_survival = 0.2", "survival_min_censoring_survival = -0.1"),
     "policy.survival_min_censoring_survival: must be a probability in [0, 1)"),
    (lambda t: t.replace("survival_min_censoring_survival = 0.2", "survival_min_censoring_survival = true"),
     "policy.survival_min_censoring_survival: must be a probability in [0, 1), got True"),
    (lambda t: t.replace('time_columns = ["time"]', 'time_columns = ["y"]'),
     "datasets.sample.time_columns: a time column cannot also be an outcome, score or model column: ['y']"),
    (lambda t: t.replace('time_columns = ["time"]', 'time_columns = "time"'),
     "datasets.sample.time_columns: must be a list of strings"),
])
def test_survival_config_errors_name_the_key_and_file(tmp_path, edit, key):
    result = init_site(tmp_path / "s")
    result.config.write_text(edit(_uncommented(result.config.read_text())))
    with pytest.raises(ConfigError) as info:
        load_config(result.config)
    assert str(result.config) in str(info.value) and key in str(info.value)


@pytest.mark.parametrize("bad, rule", [
    (None, None),
    (-3.0, "has negative values (follow-up times must be >= 0)"),
    (float("nan"), "has missing or non-finite values"),
    ("later", "is not numeric"),
])
def test_check_names_the_rule_a_time_column_breaks(tmp_path, capsys, bad, rule):
    result = init_site(tmp_path / "s")
    result.config.write_text(_uncommented(result.config.read_text()))
    frame = survival_frame(400).drop(columns=["time"]).assign(time=survival_frame(400)["time"].astype(object))
    if bad is not None:
        frame.loc[11, "time"] = bad
    frame.to_csv(result.dataset, index=False)
    code = main(["check", "--config", str(result.config)])
    out = capsys.readouterr().out
    if rule is None:
        assert code == 0 and "  time: ok (time column)" in out
    else:
        assert code == 1 and f"  time: dataset 'sample', time column 'time': {rule} (time column)" in out
