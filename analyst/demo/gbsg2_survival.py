"""The GBSG2 demo as a survival model: a Cox model's two-year risk of recurrence or death, every patient kept."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analyst.demo.gbsg2 import FEATURES, HORIZON_DAYS, gbsg2_patients, split_sites, split_train_test

__all__ = ["EVENT", "RISK", "SURVIVAL_GRID", "TIME", "SurvivalDemoData", "prepare_gbsg2_survival"]

TIME, EVENT, RISK = "time", "event", "risk_2y"
#: The demo sites' public survival grid: every quarter year (91.25 days) to 1 916 days, so two years (730 days) and
#: four years are edges; chosen from the calendar, not from the data.
SURVIVAL_GRID = tuple(91.25 * k for k in range(1, 22))


@dataclass(frozen=True)
class SurvivalDemoData:
    """GBSG2 with follow-up time and status, a Cox model fitted on the training split, and the test split's sites.

    Attributes
    ----------
    train, test : DataFrame
        Columns ``FEATURES``, ``TIME`` (days), ``EVENT`` (1 recurrence or death, 0 censored); ``test`` also ``RISK``,
        the model's predicted risk of an event by ``HORIZON_DAYS``, ``1 - S(730 | x)``.
    sites : list of DataFrame
        The test split cut into one part per site (every test patient, censored ones included).
    coefficients : dict of str to float
        The Cox model's log hazard ratios.
    """

    train: pd.DataFrame
    test: pd.DataFrame
    sites: list[pd.DataFrame]
    coefficients: dict[str, float]


def _frame(raw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "age": raw["age"], "tsize": raw["tsize"], "pnodes": raw["pnodes"], "progrec": raw["progrec"],
        "estrec": raw["estrec"], "horTh_yes": (raw["horTh"] == "yes").astype(int),
        "menostat_Post": (raw["menostat"] == "Post").astype(int),
        "tgrade": raw["tgrade"].map({"I": 1, "II": 2, "III": 3}).astype(int),
        TIME: raw["time"].astype(float), EVENT: raw["cens"].astype(int)}).reset_index(drop=True)


def prepare_gbsg2_survival(*, n_patients: int | None = None, n_sites: int = 5, train_fraction: float = 0.6,
                           seed: int = 2024) -> SurvivalDemoData:
    """Load GBSG2 (lifelines), split it 60/40, fit a Cox model on the training split and predict each test patient's
    risk of recurrence or death within two years; cut the test split into ``n_sites`` sites.

    Nobody is excluded: the censored patients stay, with their follow-up. ``n_patients``: a random subset of the
    686 patients (the same one :func:`analyst.demo.gbsg2.prepare_gbsg2` draws with this seed).
    """
    from lifelines import CoxPHFitter

    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, got {train_fraction}")
    rng = np.random.default_rng(seed)
    train, test = split_train_test(_frame(gbsg2_patients(n_patients, rng)), train_fraction, rng)
    cox = CoxPHFitter().fit(train[[*FEATURES, TIME, EVENT]], duration_col=TIME, event_col=EVENT)
    survival = cox.predict_survival_function(test[list(FEATURES)], times=[HORIZON_DAYS]).to_numpy()[0]
    test = test.assign(**{RISK: np.clip(1.0 - survival, 0.0, 1.0)})
    return SurvivalDemoData(train, test, split_sites(test, n_sites, rng), {f: float(cox.params_[f]) for f in FEATURES})
