"""The disclosure guard: every privacy rule a request must pass before the site computes an answer.

The rules are the site's, never the analyst's: the privacy level q on every aggregate (refusals name
the rule, never the count), per-release caps on epsilon and delta, the sensitivity decided at the
site (an analyst may ask for a larger one only), and caps on grid sizes. All maths is ``dsroc``'s.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

import dsroc  # rocglm_grid is looked up at first use: dsroc.roc.rocglm imports scipy.special
from dsroc import calibration_edges, model_sensitivity, require_privacy_level
from dsroc.privacy.request import check_privacy_request

from ..config import Policy
from ..errors import FailedPrecondition, InvalidArgument, PermissionDenied

__all__ = [
    "SiteSensitivity",
    "analyst_input",
    "require_privacy_level",
    "check_release_parameters",
    "site_sensitivity",
    "release_sensitivity",
    "check_grid",
    "check_theta",
    "check_edges",
    "check_threshold",
]


@contextmanager
def analyst_input(field: str):
    """Turn a ``ValueError`` from validating an analyst-supplied value into :class:`InvalidArgument`.

    Only wrap validation of values the analyst sent: those messages describe the analyst's input,
    never the site's data.
    """
    try:
        yield
    except ValueError as exc:
        raise InvalidArgument(f"{field}: {exc}") from None


def _finite(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgument(f"{name} must be finite, got {value}")
    return value


def check_release_parameters(policy: Policy, epsilon: float, delta: float) -> tuple[float, float]:
    """Validate the (epsilon, delta) an analyst asks for (the rule the analyst applies too,
    :func:`dsroc.privacy.request.check_privacy_request`, delta above 0) and apply the per-release caps."""
    with analyst_input("privacy request"):
        epsilon, delta = check_privacy_request(epsilon, delta, zero_delta=False)
    if epsilon > policy.max_epsilon:
        raise PermissionDenied(f"policy: epsilon {epsilon} is above this site's limit per release ({policy.max_epsilon})")
    if delta > policy.max_delta:
        raise PermissionDenied(f"policy: delta {delta} is above this site's limit per release ({policy.max_delta})")
    return epsilon, delta


#: slack of the per-request cap on releases held together: the analyst's split of its epsilon into stages sums back
#: to it only up to floating point (a request of 10 at a cap of 10 is accepted)
_SPLIT_SLACK = 1e-9


def check_held_together(policy: Policy, parts) -> None:
    """Apply the per-release caps to one request made of several releases held together (a histogram release and the
    release that follows it, PrepareRequest.follow_up: the quantile grid's two stages): ``parts`` their (epsilon,
    delta). Pure releases compose by adding their epsilons (and the analyst splits its delta between them), so the
    request is their sums, the number the analyst asked for; it must meet max_epsilon and max_delta as one release."""
    parts = [(_finite("epsilon", e), _finite("delta", d)) for e, d in parts]
    for k, name, cap in ((0, "epsilon", policy.max_epsilon), (1, "delta", policy.max_delta)):
        total = sum(p[k] for p in parts)
        if total > cap * (1.0 + _SPLIT_SLACK):
            split = " + ".join(f"{p[k]:.6g}" for p in parts)
            raise PermissionDenied(f"policy: {name} {total:.6g} (one request: this release and the one that follows "
                                   f"it, held together, {split}) is above this site's limit per release ({cap:g}); "
                                   f"ask for {name} <= {cap:g}")


@dataclass(frozen=True)
class SiteSensitivity:
    """The site's l2-sensitivity for a session's scores and how it was decided."""

    value: float
    rule: str
    formal_bound: bool
    note: str


def site_sensitivity(rule: str, *, policy: Policy, score_range, model=None, features=None) -> SiteSensitivity:
    """Decide the sensitivity by the site's rule.

    Parameters
    ----------
    rule : {"value", "range", "model"}
    policy : Policy
        Gives the configured value and the histogram bins of the ``model`` rule.
    score_range : (float, float)
        The range the scores are known to lie in (``range`` rule).
    model : dsroc.GlmModel, optional
        The analyst's model (``model`` rule); a score column has no model and is refused.
    features : mapping of column name to array, optional
        The model's input columns at this site.
    """
    if rule == "value":
        return SiteSensitivity(float(policy.sensitivity_value), "value", True,
                               "a value set by the site administrator")
    if rule == "range":
        lo, hi = score_range
        return SiteSensitivity(float(hi - lo), "range", True,
                               f"the width of the score range [{lo}, {hi}]: a formal bound")
    if model is None:
        raise FailedPrecondition(
            "sensitivity rule 'model' needs a GLM score source; this dataset's score columns have no model"
        )
    X = np.column_stack([features[name] for name in model.features])
    estimate = model_sensitivity(model.predict_matrix, X, n_bins=policy.model_sensitivity_bins,
                                 feature_names=model.features)
    if not estimate.value > 0:
        raise FailedPrecondition("sensitivity rule 'model' gives 0 for this model; the site cannot calibrate noise")
    return SiteSensitivity(estimate.value, "model", False, estimate.note)


# A larger sensitivity than the site's only adds noise; beyond this factor times the width of the
# score range the scores are pure noise and the noise scale could overflow.
MAX_SENSITIVITY_FACTOR = 1e6


def release_sensitivity(site: SiteSensitivity, requested: float, *, score_range=(0.0, 1.0)) -> float:
    """The sensitivity of a release: the site's, or a larger one the analyst asks for (0 = the site's)."""
    requested = _finite("sensitivity", requested)
    if requested == 0:
        return site.value
    width = float(score_range[1]) - float(score_range[0])
    if requested > MAX_SENSITIVITY_FACTOR * width:
        raise InvalidArgument(
            f"sensitivity {requested:g} is more than {MAX_SENSITIVITY_FACTOR:g} times the width of the score range "
            f"({width:g}): the released scores would be pure noise"
        )
    if requested < site.value:
        raise InvalidArgument(
            f"sensitivity {requested} is below the site's value {site.value} (rule {site.rule!r}); "
            "an analyst may only ask for a larger sensitivity"
        )
    return requested


def check_grid(policy: Policy, grid_message) -> np.ndarray:
    """The threshold grid of a ``dsroc.v1.GridSpec``, within the site's size cap."""
    which = grid_message.WhichOneof("grid") if grid_message is not None else None
    # n_points is checked against the cap before a grid is built: a grid of 2**32 points would take
    # 32 GB of memory.
    if which == "n_points":
        _check_cap("the grid", int(grid_message.n_points) - 2, "thresholds", policy.max_thresholds)
    with analyst_input("grid"):
        if which == "n_points":
            grid = dsroc.rocglm_grid(int(grid_message.n_points))
        elif which == "thresholds":
            grid = dsroc.rocglm_grid(np.asarray(grid_message.thresholds.values, dtype=np.float64))
        else:
            grid = dsroc.rocglm_grid(None)
    _check_cap("the grid", grid.size, "thresholds", policy.max_thresholds)
    return grid


def _check_cap(what: str, size: int, unit: str, cap: int) -> None:
    if size > cap:
        raise PermissionDenied(f"policy: {what} has {size} {unit}; this site answers at most {cap}")


def check_theta(values) -> np.ndarray:
    """Theta = (gamma1, gamma2): two finite numbers."""
    theta = np.asarray(list(values), dtype=np.float64)
    if theta.shape != (2,) or not np.isfinite(theta).all():
        raise InvalidArgument(f"theta must be two finite numbers (gamma1, gamma2), got {list(values)}")
    return theta


def check_edges(policy: Policy, request) -> np.ndarray:
    """Calibration bin edges of a ``CalibrationPartsRequest``: n_bins (default 10) or explicit edges."""
    which = request.WhichOneof("bins")
    if which != "edges":  # before building the edges (memory), as for grids
        _check_cap("n_bins", int(request.n_bins), "calibration bins", policy.max_thresholds)
    with analyst_input("edges" if which == "edges" else "n_bins"):
        if which == "edges":
            edges = calibration_edges(edges=np.asarray(request.edges.values, dtype=np.float64))
            if edges[0] != 0.0 or edges[-1] != 1.0:
                raise ValueError("explicit edges must start at 0 and end at 1 so that every patient has a bin")
            # Equal-width bins (what n_bins gives) are fine as they are; other edges must be on the
            # lattice, so that first-edge refusals cannot be bisected either.
            if not np.allclose(edges, np.linspace(0.0, 1.0, edges.size), rtol=0.0, atol=1e-12):
                for edge in edges[1:-1]:
                    check_threshold(edge, steps=policy.threshold_steps, name="edges: edge")
        else:
            edges = calibration_edges(int(request.n_bins) if request.n_bins else 10)
    _check_cap("the edges", edges.size - 1, "calibration bins", policy.max_thresholds)
    return edges


def check_threshold(value: float, *, score_range=(0.0, 1.0), steps: int = 100, name: str = "threshold") -> float:
    """A classification threshold: a finite number on the site's lattice of ``steps`` steps of the score range.

    Refusals are not recorded (a refused request changes nothing), so without a lattice an analyst
    could bisect a refusal boundary (a band of 1 to q-1 patients, a cell below q) down to one
    patient's exact score. On the lattice a refusal says no more than which step it is in.
    Returns the lattice point itself, so that values within the rounding tolerance of one (0.3 and
    0.30000000000000004) are the same threshold and nothing can be probed between them.
    """
    value = _finite(name, value)
    lo, hi = (float(v) for v in score_range)
    if not lo <= value <= hi:
        # Also keeps the lattice arithmetic below finite (a threshold of 1e308 overflowed it).
        raise InvalidArgument(f"{name} {value} must lie in the score range [{lo:g}, {hi:g}]")
    step = (hi - lo) / steps
    k = round((value - lo) / step)
    if abs(value - (lo + k * step)) > 1e-9 * max(hi - lo, 1.0):
        raise InvalidArgument(
            f"{name} {value} is not on this site's lattice: use {lo:g} + k * {step:g} for an integer k "
            f"(policy.threshold_steps = {steps} steps of the score range [{lo:g}, {hi:g}])"
        )
    return lo + (hi - lo) * k / steps
