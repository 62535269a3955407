"""The calibration hierarchy of released cells and the improper-curve warning of a fitted ROC-GLM."""

from __future__ import annotations

__all__ = ["calibration_summary", "improper_region", "improper_warning"]


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


