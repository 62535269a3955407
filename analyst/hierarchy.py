"""The calibration hierarchy and the improper-curve warning in a result's words (summary lines, JSON)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["calibration_summary", "hierarchy_lines", "hierarchy_to_dict", "improper_region", "improper_warning"]


def _num(x: Any) -> Any:
    x = float(x)
    return x if math.isfinite(x) else None


def _fmt(x, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _estimate(e) -> dict[str, Any]:
    return {"value": _num(e.value), "lower": _num(e.lower), "upper": _num(e.upper), "variance": _num(e.variance)}


def hierarchy_to_dict(h) -> dict[str, Any] | None:
    """JSON-ready view of a :class:`dsroc.CalibrationHierarchy` (None stays None)."""
    if h is None:
        return None
    return {"n": _num(h.n), "observed": _num(h.observed), "expected": _num(h.expected), "level": _num(h.level),
            "cells": int(h.cells), "oe": _estimate(h.oe), "calibration_intercept": _estimate(h.intercept),
            "recalibration_intercept": _num(h.recalibration.intercept), "calibration_slope": _estimate(h.slope),
            "recalibration_cov": [[_num(v) for v in row] for row in np.asarray(h.recalibration.cov)],
            "curve_lower": [_num(v) for v in h.curve_lower], "curve_upper": [_num(v) for v in h.curve_upper]}


def hierarchy_lines(h, pct: int) -> list[str]:
    """The calibration hierarchy in the summary's words."""
    if h is None:
        return []
    ci = lambda e: f"{_fmt(e.value, 3)} {pct}% CI [{_fmt(e.lower, 3)}, {_fmt(e.upper, 3)}]"  # noqa: E731
    return [f"Calibration hierarchy (Van Calster et al. 2016; {int(h.n)} patients in {h.cells} released cells)",
            f"  mean:     O/E {ci(h.oe)} (1 = as many events as predicted); calibration-in-the-large "
            f"{ci(h.intercept)} (0 ideal)",
            f"  weak:     calibration slope {ci(h.slope)} (1 ideal; below 1: predictions too extreme), "
            f"with intercept {_fmt(h.recalibration.intercept, 3)}",
            "  moderate: the curve below, with Wilson intervals per bin (calibration.png)"]


def improper_region(params, *, min_width: float = 0.01) -> tuple[float, float] | None:
    """Where the fitted curve lies below the diagonal within [0.01, 0.99], if that stretch is at least
    ``min_width`` wide (every binormal curve with gamma2 != 1 crosses the diagonal somewhere)."""
    import dsroc

    bad = dsroc.rocglm_improper_range(params, lo=0.01, hi=0.99)
    return bad if bad is not None and bad[1] - bad[0] >= min_width else None


def improper_warning(params) -> str | None:
    """A warning when the fitted ROC-GLM curve lies below the diagonal (see :func:`improper_region`)."""
    bad = improper_region(params)
    if bad is None:
        return None
    return (f"the fitted ROC-GLM curve lies below the diagonal (worse than chance) for false-positive fractions "
            f"{bad[0]:.2f} to {bad[1]:.2f}: an improper binormal curve (gamma2 = {float(params[1]):.3g}); its AUC "
            "averages over that region. Large noise (a large tau next to the scores' spread) often causes this.")


def calibration_summary(curve, *, level: float):
    """The calibration hierarchy of ``curve``, or None when the released cells cannot support it."""
    import dsroc

    try:
        return dsroc.calibration_hierarchy(curve, level=level)
    except ValueError:
        return None


