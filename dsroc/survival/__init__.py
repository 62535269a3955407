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

Conventions. Within a time point, events precede censorings (standard Kaplan-Meier); the censoring
survival ``G`` (reverse KM) therefore removes the events at ``t`` before the censorings at ``t``. Inverse
probability of censoring weights are ``1 / G(T-)`` for a case at ``T`` (the left limit, as timeROC and
riskRegression) and ``1 / G(t)`` for the controls at horizon ``t``. Patients in the same time bin are tied
in time; pairs tied in score count one half. Competing risks are not handled.
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
    # .brier
    "brier_score": "brier", "integrated_brier_score": "brier", "scaled_brier": "brier",
    # .calibration
    "ObservedExpected": "calibration", "SurvivalCalibration": "calibration", "calibration_at": "calibration",
    # .recalibration
    "GroupedCalibration": "recalibration", "grouped_calibration": "recalibration",
    # .pooling
    "SiteRelease": "pooling", "SiteSurvival": "pooling", "SitePooled": "pooling",
    # .validation
    "CurveBand": "validation", "RiskGroup": "validation", "SurvivalValidation": "validation",
    "survival_validation": "validation",
}

__all__ = [
    "SurvivalHistogram", "sum_histograms", "check_time_edges", "check_score_edges",
    "SurvivalCurve", "kaplan_meier", "censoring_survival",
    "TimeDependentAUC", "case_weights", "cumulative_dynamic_auc", "harrell_c", "uno_c",
    "brier_score", "integrated_brier_score", "scaled_brier",
    "ObservedExpected", "SurvivalCalibration", "calibration_at",
    "GroupedCalibration", "grouped_calibration",
    "SiteRelease", "SiteSurvival", "SitePooled",
    "CurveBand", "RiskGroup", "SurvivalValidation", "survival_validation",
]

export_lazily(__name__, _EXPORTS)
