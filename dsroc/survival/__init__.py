"""Survival validation from (noisy) summed histograms: Kaplan-Meier, time-dependent AUC, C-indices, Brier, calibration.

Data model. The time grid is public: edges ``0 = e_0 < e_1 < ... < e_K`` (the last may be ``+inf``). A
patient with follow-up time ``T`` is in time bin ``k`` (``1 .. K`` here; index ``k - 1`` in arrays) if
``e_{k-1} < T <= e_k`` (``T = 0`` in the first bin), and in the binned analysis her time is the right edge
``e_k``; an infinite last edge stands for the time ``2 e_{K-1} - e_{K-2}``. Her status is 0 (censored) or
1 (event). The score grid is public too: edges ``0 = s_0 < ... < s_J = 1`` on the predicted risk of an
event by the horizon, bins ``[s_j, s_{j+1})`` (the last closed). A binned score is its bin's midpoint
unless the per-cell sums of the risks (and of their squares) are released.

A :class:`SurvivalHistogram` holds the counts ``(K, 2, J)`` per (time bin, status, score bin), real-valued
when noisy, with the optional risk sums; sites pool by ``+`` or :func:`sum_histograms`. Estimators read
negative noisy cells as zero (see :mod:`dsroc.survival.counts`).

Conventions. Times are grouped: a bin holds continuous follow-up times in an order the release hides. The
Kaplan-Meier curves are life-table estimates (those censored in a bin count one half at risk of its events,
and the events one half at risk of its censorings in the censoring survival ``G``); inverse probability of
censoring weights are ``1 / G(T-)`` for a case at ``T`` (timeROC and riskRegression), ``G`` taken within her
bin as ``sqrt(G(t_{k-1}) G(t_k))``, and ``1 / G(t)`` for the controls at horizon ``t``. With one patient per
time bin all of this is the per-patient Kaplan-Meier and ``G(T-)``. Two patients in the same time bin
are in either order with probability one half (a C-index counts such a pair half comparable); pairs tied in
score count one half. Competing risks are not handled.
"""

from .._lazy import export_lazily

_EXPORTS = {
    # .counts
    "SurvivalHistogram": "counts", "sum_histograms": "counts", "check_time_edges": "counts",
    "check_score_edges": "counts",
    # .kaplan_meier
    "SurvivalCurve": "kaplan_meier", "kaplan_meier": "kaplan_meier", "censoring_survival": "kaplan_meier",
    # .discrimination
    "TimeDependentAUC": "discrimination", "case_weights": "discrimination",
    "cumulative_dynamic_auc": "discrimination", "harrell_c": "discrimination", "uno_c": "discrimination",
    "UnoTruncation": "discrimination", "uno_truncation": "discrimination",
    # .brier
    "brier_score": "brier", "integrated_brier_score": "brier", "scaled_brier": "brier",
    # .calibration
    "ObservedExpected": "calibration", "SurvivalCalibration": "calibration", "calibration_at": "calibration",
    # .recalibration
    "GroupedCalibration": "recalibration", "grouped_calibration": "recalibration",
    # .pooling
    "SiteRelease": "pooling", "SiteSurvival": "pooling",
    # .validation
    "CurveBand": "validation", "RiskGroup": "validation", "SurvivalValidation": "validation",
    "survival_validation": "validation",
}

__all__ = [
    "SurvivalHistogram", "sum_histograms", "check_time_edges", "check_score_edges",
    "SurvivalCurve", "kaplan_meier", "censoring_survival",
    "TimeDependentAUC", "case_weights", "cumulative_dynamic_auc", "harrell_c", "uno_c",
    "UnoTruncation", "uno_truncation",
    "brier_score", "integrated_brier_score", "scaled_brier",
    "ObservedExpected", "SurvivalCalibration", "calibration_at",
    "GroupedCalibration", "grouped_calibration",
    "SiteRelease", "SiteSurvival",
    "CurveBand", "RiskGroup", "SurvivalValidation", "survival_validation",
]

export_lazily(__name__, _EXPORTS)
