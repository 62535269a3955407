"""Score sources: a score column of the dataset, or a GLM sent by the analyst as data (never code)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
import math
from dataclasses import dataclass

import numpy as np

import dsroc  # GlmModel is looked up at first use: dsroc.glm_model imports scipy.special

from ..config import DatasetConfig
from ..errors import InvalidArgument
from .datasets import Table, feature_values, score_values

if TYPE_CHECKING:
    from dsroc import GlmModel

__all__ = ["ScoreSpec", "model_columns", "compute_scores", "MAX_ABS_COEFFICIENT"]

_LINKS = {1: "logit", 2: "probit"}  # dsroc.v1.Link values

# Coefficients this large make a logit or probit saturate anyway. Larger ones let a model overflow
# on purpose: beta_1 x_1 = +inf and beta_2 x_2 = -inf exactly for the patients with x_1 > a and x_2 > b
# give those patients a NaN score, and counting NaNs in a release (or an error from an aggregate)
# would then count patients matching any condition the analyst likes, below q too.
MAX_ABS_COEFFICIENT = 1e6


@dataclass(frozen=True)
class ScoreSpec:
    """Where a session's scores come from: exactly one of ``column`` and ``model``."""

    column: str | None = None
    model: GlmModel | None = None

    @classmethod
    def from_proto(cls, message) -> "ScoreSpec":
        """Validate a ``dsroc.v1.ScoreSource`` message."""
        which = message.WhichOneof("source")
        if which == "score_column":
            if not message.score_column:
                raise InvalidArgument("score.score_column must name a score column")
            return cls(column=message.score_column)
        if which != "model":
            raise InvalidArgument("score must give either score_column or model")
        m = message.model
        if m.link not in _LINKS:
            raise InvalidArgument("score.model.link must be LINK_LOGIT or LINK_PROBIT")
        coefficients = {}
        for c in m.coefficients:
            if not c.name:
                raise InvalidArgument("score.model.coefficients: every coefficient needs a column name")
            if c.name in coefficients:
                raise InvalidArgument(f"score.model.coefficients: column {c.name!r} appears twice")
            if not math.isfinite(c.value) or abs(c.value) > MAX_ABS_COEFFICIENT:
                raise InvalidArgument(f"score.model.coefficients: the coefficient of {c.name!r} must be finite "
                                      f"and at most {MAX_ABS_COEFFICIENT:g} in absolute value")
            coefficients[c.name] = c.value
        if not math.isfinite(m.intercept) or abs(m.intercept) > MAX_ABS_COEFFICIENT:
            raise InvalidArgument(f"score.model.intercept must be finite and at most {MAX_ABS_COEFFICIENT:g} "
                                  "in absolute value")
        if not coefficients:
            raise InvalidArgument("score.model needs at least one coefficient (a constant model has no ROC curve)")
        return cls(model=dsroc.GlmModel(link=_LINKS[m.link], intercept=m.intercept, coefficients=coefficients))

    @classmethod
    def from_key(cls, key: str) -> "ScoreSpec":
        """The source a :attr:`key` (as stored in the ledger) names."""
        kind, _, body = key.partition(":")
        if kind == "column":
            return cls(column=body)
        if kind == "glm":
            m = json.loads(body)
            return cls(model=dsroc.GlmModel(link=m["link"], intercept=m["intercept"],
                                            coefficients=dict(m["coefficients"])))
        raise ValueError(f"not a score source key: {key!r}")

    @property
    def key(self) -> str:
        """Canonical text identifying the source, used as the ledger's release key."""
        if self.column is not None:
            return f"column:{self.column}"
        body = {"link": self.model.link, "intercept": self.model.intercept,
                "coefficients": sorted(self.model.coefficients.items())}
        return "glm:" + json.dumps(body, separators=(",", ":"))


def model_columns(config: DatasetConfig, table: Table) -> list[str]:
    """Columns an analyst's model may read: the configured list, else every column but the outcomes and the
    follow-up times (what a prediction is validated against is never its input)."""
    allowed = config.model_columns if config.model_columns is not None else list(table.columns)
    return [c for c in allowed if c not in config.outcomes and c not in config.time_columns]


def compute_scores(spec: ScoreSpec, config: DatasetConfig, table: Table) -> tuple[np.ndarray, tuple[float, float]]:
    """The scores of every row and the range they are known to lie in.

    Raises :class:`InvalidArgument` for an undeclared score column, a model reading an unknown or
    forbidden column (outcomes and times are never model inputs), or bad values in a column it reads.
    """
    if spec.column is not None:
        if spec.column not in config.scores:
            raise InvalidArgument(
                f"dataset {config.name!r} has no declared score column {spec.column!r} (declared: {list(config.scores)})"
            )
        return score_values(table, config.name, spec.column, config.score_range), config.score_range
    allowed = set(model_columns(config, table))
    for name in spec.model.features:
        if name not in allowed:
            raise InvalidArgument(f"score.model: dataset {config.name!r} has no model column {name!r}")
    columns = feature_values(table, config.name, spec.model.features)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = spec.model.predict(columns)
    if not np.isfinite(scores).all():
        # Only features near 1e300 can get here (coefficients are bounded); never say for how many rows.
        raise InvalidArgument(f"score.model: the model's linear predictor overflows on dataset {config.name!r}")
    return scores, (0.0, 1.0)
