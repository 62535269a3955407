"""A prediction model in safe declarative form: a GLM with a logit or probit link over named columns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
from scipy.special import expit, ndtr

__all__ = ["GlmModel", "LINKS"]

LINKS = ("logit", "probit")


@dataclass(frozen=True)
class GlmModel:
    """``score = g^-1(intercept + sum_k beta_k x_k)`` with ``g`` the logit or probit link.

    The only kind of model a site accepts from an analyst: data, never code.

    Parameters
    ----------
    link : {"logit", "probit"}
    intercept : float
    coefficients : mapping of column name to float
    """

    link: str
    intercept: float
    coefficients: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if self.link not in LINKS:
            raise ValueError(f"link must be one of {LINKS}, got {self.link!r}")
        if not math.isfinite(float(self.intercept)):
            raise ValueError(f"intercept must be finite, got {self.intercept}")
        coefs = {}
        for name, value in dict(self.coefficients).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"coefficient names must be non-empty strings, got {name!r}")
            if not math.isfinite(float(value)):
                raise ValueError(f"coefficient {name!r} must be finite, got {value}")
            coefs[name] = float(value)
        object.__setattr__(self, "intercept", float(self.intercept))
        object.__setattr__(self, "coefficients", coefs)

    @property
    def features(self) -> list[str]:
        """The column names the model reads, in order."""
        return list(self.coefficients)

    def linear_predictor(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """``intercept + sum beta_k x_k`` for a table given as a mapping of column arrays."""
        eta = None
        for name, beta in self.coefficients.items():
            if name not in columns:
                raise ValueError(f"model column {name!r} is not in the data (available: {sorted(columns)})")
            x = np.asarray(columns[name], dtype=np.float64)
            if not np.isfinite(x).all():
                raise ValueError(f"column {name!r} has {int((~np.isfinite(x)).sum())} missing or non-finite value(s)")
            eta = beta * x if eta is None else eta + beta * x
        if eta is None:
            n = len(next(iter(columns.values()))) if columns else 0
            eta = np.zeros(n)
        return self.intercept + eta

    def predict(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Predicted probabilities."""
        eta = self.linear_predictor(columns)
        return expit(eta) if self.link == "logit" else ndtr(eta)

    def predict_matrix(self, X: np.ndarray) -> np.ndarray:
        """Predicted probabilities for a matrix whose columns follow :attr:`features`."""
        X = np.asarray(X, dtype=np.float64)
        return self.predict({name: X[:, j] for j, name in enumerate(self.features)})
