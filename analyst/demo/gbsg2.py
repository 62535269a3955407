"""The GBSG2 demo data: 2-year recurrence-free survival, a logistic model and five site files."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["FEATURES", "HORIZON_DAYS", "OUTCOME", "DemoData", "gbsg2_patients", "prepare_gbsg2", "split_sites",
           "split_train_test"]

HORIZON_DAYS = 730
OUTCOME = "rfs_2y"
#: Numeric model columns derived from GBSG2: binary categoricals dummy-coded, the tumour grade as its
#: ordinal number 1-3 (grade I alone has so few events that a dummy separates in small subsets).
FEATURES = ("age", "tsize", "pnodes", "progrec", "estrec",
            "horTh_yes", "menostat_Post", "tgrade")


@dataclass(frozen=True)
class DemoData:
    """Prepared GBSG2 data.

    Attributes
    ----------
    train, test : DataFrame
        The 60 % training split and the 40 % test split (columns ``FEATURES`` and ``OUTCOME``).
    sites : list of DataFrame
        The test split cut into parts, one per site.
    intercept : float
    coefficients : dict of str to float
        The fitted logistic regression over ``FEATURES``; predicts P(no recurrence within 2 years).
    n_excluded : int
        Patients dropped because they were censored before the horizon.
    """

    train: pd.DataFrame
    test: pd.DataFrame
    sites: list[pd.DataFrame]
    intercept: float
    coefficients: dict[str, float]
    n_excluded: int

    def model(self):
        """The fitted model as a :class:`dsroc.GlmModel`."""
        from dsroc import GlmModel

        return GlmModel(link="logit", intercept=self.intercept, coefficients=dict(self.coefficients))

    def model_spec(self) -> dict:
        """The model in the declarative JSON form the CLI and the sites accept."""
        return {"link": "logit", "intercept": self.intercept, "coefficients": dict(self.coefficients)}


def gbsg2_patients(n_patients: int | None, rng: np.random.Generator) -> pd.DataFrame:
    """GBSG2's 686 patients (lifelines), or a random subset of ``n_patients`` (at least 50) drawn with ``rng``."""
    from lifelines.datasets import load_gbsg2

    raw = load_gbsg2()
    if n_patients is not None:
        if not 50 <= n_patients <= len(raw):
            raise ValueError(f"n_patients must lie between 50 and {len(raw)}, got {n_patients}")
        raw = raw.iloc[np.sort(rng.choice(len(raw), n_patients, replace=False))]
    return raw


def split_train_test(data: pd.DataFrame, train_fraction: float,
                     rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``data`` cut at random into a training split (``train_fraction`` of the rows) and a test split."""
    perm = rng.permutation(len(data))
    n_train = int(round(train_fraction * len(data)))
    return (data.iloc[np.sort(perm[:n_train])].reset_index(drop=True),
            data.iloc[np.sort(perm[n_train:])].reset_index(drop=True))


def split_sites(test: pd.DataFrame, n_sites: int, rng: np.random.Generator) -> list[pd.DataFrame]:
    """``test`` cut at random into ``n_sites`` parts of (nearly) equal size, rows in their order."""
    return [test.iloc[np.sort(rows)].reset_index(drop=True)
            for rows in np.array_split(rng.permutation(len(test)), n_sites)]


def _derive(raw: pd.DataFrame) -> pd.DataFrame:
    """Outcome and numeric features; patients censored before the horizon are excluded."""
    event_free = raw["time"] > HORIZON_DAYS
    known = event_free | (raw["cens"] == 1)  # censored before the horizon: outcome unknown
    d = raw.loc[known]
    out = pd.DataFrame({
        "age": d["age"], "tsize": d["tsize"], "pnodes": d["pnodes"],
        "progrec": d["progrec"], "estrec": d["estrec"],
        "horTh_yes": (d["horTh"] == "yes").astype(int),
        "menostat_Post": (d["menostat"] == "Post").astype(int),
        "tgrade": d["tgrade"].map({"I": 1, "II": 2, "III": 3}),
        OUTCOME: event_free[known].astype(int),
    })
    return out.astype({c: "int64" for c in out.columns}).reset_index(drop=True)


def prepare_gbsg2(*, n_patients: int | None = None, n_sites: int = 5, train_fraction: float = 0.6,
                  seed: int = 2024) -> DemoData:
    """Load GBSG2 from ``lifelines``, build the outcome, fit the model and cut the test split.

    Parameters
    ----------
    n_patients : int, optional
        Use a random subset of this many of the 686 patients (before exclusions); all when omitted.
    n_sites : int
        Number of site files the test split is cut into.
    train_fraction : float
        Share of patients in the training split, strictly between 0 and 1.
    seed : int
        Seed of the subset, the split and the site assignment.

    Returns
    -------
    DemoData
    """
    import statsmodels.api as sm

    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, got {train_fraction}")
    if n_sites < 1:
        raise ValueError(f"n_sites must be at least 1, got {n_sites}")
    rng = np.random.default_rng(seed)
    raw = gbsg2_patients(n_patients, rng)
    data = _derive(raw)
    n_excluded = len(raw) - len(data)
    train, test = split_train_test(data, train_fraction, rng)
    fit = sm.Logit(train[OUTCOME], sm.add_constant(train[list(FEATURES)].astype(float))).fit(
        method="newton", maxiter=100, disp=0)
    if not fit.mle_retvals["converged"]:
        raise RuntimeError("the logistic regression on the GBSG2 training split did not converge")
    params = fit.params
    return DemoData(train=train, test=test, sites=split_sites(test, n_sites, rng), intercept=float(params["const"]),
                    coefficients={f: float(params[f]) for f in FEATURES}, n_excluded=n_excluded)
