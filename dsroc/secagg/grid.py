"""The secagg protocol's grid: how many bins, from the first round's estimate of n and the summed noise."""

from __future__ import annotations

import math

__all__ = ["DESIGN_SITES", "secagg_n_bins"]

# recommended_n_bins was chosen on a study of five sites: its per-site sigma is a summed noise SD / sqrt(5).
DESIGN_SITES = 5
# Patients per unit of summed noise SD from which 7, and then 10, quantile bins beat 5 (docs/simulations.md).
_MORE_BINS = ((10_000.0, 10), (1_000.0, 7))


def secagg_n_bins(n: float, sigma: float) -> int:
    """Bins for the secagg protocol's second round: the study's count for its summed noise SD ``sigma``
    (:func:`dsroc.histogram.grid.recommended_n_bins` of ``sigma / sqrt(5)``), raised to 7 when the estimated
    number of patients ``n`` is at least 1 000 ``sigma`` and to 10 from 10 000 ``sigma``.

    More bins follow the ROC curve more closely, so a misspecified ROC-GLM's bias falls, while each ROC
    point sums more cells of noise; the quick Monte Carlo of docs/simulations.md (binormal and skewed
    designs, quantile bins, epsilon 1) found 5 bins best at n = 1 000, 7 at n = 10 000 and 10 at 100 000.
    """
    from ..histogram.grid import recommended_n_bins

    n, sigma = float(n), float(sigma)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
    base = recommended_n_bins(sigma / math.sqrt(DESIGN_SITES))
    if not math.isfinite(n) or sigma == 0.0:
        return base
    for ratio, bins in _MORE_BINS:
        if n >= ratio * sigma:
            return max(base, bins)
    return base
