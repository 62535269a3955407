"""Privacy settings recommended by the simulation study: which (epsilon, delta) keep the paper protocol's AUC accurate
for a Delta, and when it must refuse (the histogram protocol's width planning is :mod:`analyst.width_plan`)."""

from __future__ import annotations

import csv
import math
import numbers
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

__all__ = ["DEFAULT_TOLERANCE", "RecommendedSetting", "noise_ceiling", "paper_setting_refusal", "recommend_settings",
           "recommendation_warning"]

#: Default MAE tolerance: at 0.01 the ROC-GLM's own bias near AUC 0.95 already uses up the margin
#: (docs/simulations.md), at 0.015 the qualifying settings are monotone in epsilon and delta.
DEFAULT_TOLERANCE = 0.015

_PACKAGED = "recommended_protocol.csv"
_COLUMNS = ("sensitivity", "epsilon", "delta", "tau", "tolerance", "worst_bin_mae", "worst_bin_delta_ci",
            "ci_within_tolerance")


@dataclass(frozen=True)
class RecommendedSetting:
    """One (epsilon, delta) that met the tolerance in every empirical-AUC bin of the simulation study.

    Attributes
    ----------
    epsilon, delta : float
        The privacy level of each site's release.
    studied_sensitivity : float
        The studied Delta the recommendation comes from (the smallest studied Delta >= the one asked for).
    tau : float
        The noise SD the analytic Gaussian mechanism gives at (epsilon, delta, studied Delta).
    tolerance : float
        The MAE tolerance met.
    worst_bin_mae : float
        Largest mean |AUC_emp - AUC_ROC-GLM| over the empirical-AUC bins.
    worst_bin_delta_ci : float
        Largest mean difference of the CI limits (noisy vs true scores) over the bins.
    ci_within_tolerance : bool
        Whether ``worst_bin_delta_ci`` also meets the tolerance.
    corrected_coverage : float
        Smallest share of replications in which the noise-corrected CI (:func:`dsroc.noise_corrected_auc`)
        held the pooled AUC, over the score shapes and n = 10^3 ... 10^6 of ``python -m simulations
        paper-coverage`` at the nearest studied noise level at least ``tau``; NaN where not studied.
    """

    epsilon: float
    delta: float
    studied_sensitivity: float
    tau: float
    tolerance: float
    worst_bin_mae: float
    worst_bin_delta_ci: float
    ci_within_tolerance: bool
    corrected_coverage: float = math.nan

    def __str__(self) -> str:
        return f"epsilon = {self.epsilon:g}, delta = {self.delta:g}"


def _read_table(table: str | Path | None) -> tuple[list[dict[str, float]], str]:
    """Rows of a ``recommended.csv`` as dictionaries of numbers, and a name of the source for messages."""
    if table is None:
        source = f"the packaged table {_PACKAGED}"
        text = resources.files("analyst").joinpath("data", _PACKAGED).read_text(encoding="utf-8")
    else:
        source = str(table)
        try:
            text = Path(table).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"recommendation table not found: {table}") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ValueError(f"recommendation table {source} lacks the column(s) {missing}; "
                         "expected a recommended.csv written by 'python -m simulations run'")
    rows = []
    for i, raw in enumerate(reader, start=2):
        try:
            row = {c: float(raw[c]) for c in _COLUMNS if c != "ci_within_tolerance"}
        except (TypeError, ValueError):
            raise ValueError(f"recommendation table {source}, line {i}: a number is malformed") from None
        row["ci_within_tolerance"] = str(raw["ci_within_tolerance"]).strip().lower() == "true"
        try:  # optional: written by 'python -m simulations paper-coverage --recommended'
            row["corrected_coverage"] = float(raw.get("corrected_coverage") or math.nan)
        except ValueError:
            raise ValueError(f"recommendation table {source}, line {i}: corrected_coverage is malformed") from None
        rows.append(row)
    return rows, source


def recommend_settings(sensitivity: float, *, tolerance: float = DEFAULT_TOLERANCE,
                       table: str | Path | None = None, max_epsilon: float | None = None,
                       max_delta: float | None = None,
                       min_corrected_coverage: float | None = None) -> list[RecommendedSetting]:
    """The (epsilon, delta) settings the simulation study recommends for a sensitivity Delta.

    The study (``python -m simulations run --mode protocol``: the deployed procedure) ran a grid of
    Delta, epsilon and delta; a
    setting is recommended when its mean |AUC_emp - AUC_ROC-GLM| stays within ``tolerance`` in every
    empirical-AUC bin and its fits rarely fail. Sites whose Delta lies between two studied values get
    the recommendation of the next larger studied Delta (more noise: conservative).

    Parameters
    ----------
    sensitivity : float
        The sites' l2-sensitivity Delta (the largest over the sites).
    tolerance : float
        MAE tolerance; must be one the table was written with (the packaged table: 0.01, 0.015, 0.02).
    table : path, optional
        A ``recommended.csv`` of another run of the study; default the packaged full protocol-mode study.
    max_epsilon, max_delta : float, optional
        Keep only settings the sites' policies accept (epsilon and delta per release at most these).
    min_corrected_coverage : float, optional
        Keep only settings whose noise-corrected CI held the pooled AUC in at least this share of the
        replications in every shape and n of the coverage study (``corrected_coverage``).

    Returns
    -------
    list of RecommendedSetting
        Ordered by privacy: smallest epsilon first, then smallest delta.

    Raises
    ------
    ValueError
        When ``sensitivity`` exceeds every Delta in the table or no studied setting for the next larger
        Delta met the tolerance (no recommendation exists), or when ``tolerance`` is not in the table.
    """
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real) or not (
            math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
    rows, source = _read_table(table)
    tolerances = sorted({r["tolerance"] for r in rows})
    if not any(math.isclose(tolerance, t, rel_tol=1e-9) for t in tolerances):
        raise ValueError(f"tolerance {tolerance:g} is not in {source}; available: "
                         f"{', '.join(f'{t:g}' for t in tolerances) or 'none (the table is empty)'}")
    studied = sorted({r["sensitivity"] for r in rows})
    # Delta values print with a few digits; accept a sensitivity equal to a studied Delta up to rounding.
    larger = [d for d in studied if d >= sensitivity or math.isclose(d, sensitivity, rel_tol=1e-9)]
    if not larger:
        raise ValueError(f"no recommendation exists for sensitivity {sensitivity:g}: it exceeds every Delta "
                         f"for which {source} recommends any setting (largest {max(studied):g}); "
                         "no studied (epsilon, delta) kept the AUC accurate at that much noise")
    chosen = larger[0]
    picked = [r for r in rows if r["sensitivity"] == chosen and math.isclose(r["tolerance"], tolerance, rel_tol=1e-9)]
    if not picked:
        raise ValueError(f"no recommendation exists for sensitivity {sensitivity:g} at tolerance {tolerance:g}: "
                         f"no studied (epsilon, delta) met it in every AUC bin for Delta = {chosen:g} in {source}")
    picked = [r for r in picked if (max_epsilon is None or r["epsilon"] <= max_epsilon)
              and (max_delta is None or r["delta"] <= max_delta)]
    if not picked:
        limits = ", ".join(f"{k} <= {v:g}" for k, v in (("epsilon", max_epsilon), ("delta", max_delta)) if v is not None)
        raise ValueError(f"no recommended setting for sensitivity {sensitivity:g} fits the sites' policies "
                         f"({limits} per release)")
    if min_corrected_coverage is not None:
        picked = [r for r in picked if r.get("corrected_coverage", math.nan) >= min_corrected_coverage]
        if not picked:
            raise ValueError(f"no recommended setting for sensitivity {sensitivity:g} has a noise-corrected CI that held "
                             f"the pooled AUC in at least {min_corrected_coverage:g} of the coverage study's replications")
    picked.sort(key=lambda r: (r["epsilon"], r["delta"]))
    return [RecommendedSetting(epsilon=r["epsilon"], delta=r["delta"], studied_sensitivity=chosen, tau=r["tau"],
                               tolerance=r["tolerance"], worst_bin_mae=r["worst_bin_mae"],
                               worst_bin_delta_ci=r["worst_bin_delta_ci"],
                               ci_within_tolerance=r["ci_within_tolerance"],
                               corrected_coverage=r.get("corrected_coverage", math.nan))
            for r in picked]


def recommendation_warning(epsilon: float, delta: float, sensitivities: Iterable[float], *,
                           tau: float | None = None, tolerance: float = DEFAULT_TOLERANCE,
                           table: str | Path | None = None) -> str | None:
    """A warning when (epsilon, delta) is not recommended for the largest of the sites' Delta, else None.

    The largest Delta adds the most noise, so it decides whether the AUC can be trusted. ``tau``, the
    largest noise SD the sites used, is compared in the message with the noise of the recommended settings.
    """
    delta_max = max(float(s) for s in sensitivities)
    try:
        settings = recommend_settings(delta_max, tolerance=tolerance, table=table)
    except ValueError as exc:
        return f"{exc}; the AUC may be pulled towards 0.5 by the noise."
    if any(math.isclose(s.epsilon, epsilon, rel_tol=1e-9) and math.isclose(s.delta, delta, rel_tol=1e-9)
           for s in settings):
        return None
    listed = "; ".join(f"({s.epsilon:g}, {s.delta:g})" for s in settings)
    noise = "" if tau is None else (f" The sites' noise SD is tau = {tau:.3g}; the recommended settings have "
                                    f"tau <= {max(s.tau for s in settings):.3g}.")
    return (f"epsilon = {epsilon:g}, delta = {delta:g} is not among the settings the simulation study recommends "
            f"for Delta = {delta_max:.3g} (studied Delta {settings[0].studied_sensitivity:g}, MAE of the AUC within "
            f"{tolerance:g} in every AUC bin); recommended (epsilon, delta): {listed}.{noise} "
            "The AUC may be pulled towards 0.5 by the noise.")


def noise_ceiling(*, tolerance: float = DEFAULT_TOLERANCE, table: str | Path | None = None) -> float:
    """The largest release noise SD tau the simulation study vouches for at every sensitivity it studied: per studied
    Delta the largest tau of a recommended setting, and the smallest of those (conservative: at any Delta, a setting
    whose tau is at most this is no noisier than one the study found to keep the ROC-GLM AUC within ``tolerance``)."""
    rows, source = _read_table(table)
    rows = [r for r in rows if math.isclose(r["tolerance"], tolerance, rel_tol=1e-9)]
    if not rows:
        raise ValueError(f"tolerance {tolerance:g} is not in {source}")
    per_delta: dict[float, float] = {}
    for r in rows:
        per_delta[r["sensitivity"]] = max(per_delta.get(r["sensitivity"], 0.0), r["tau"])
    return min(per_delta.values())


def _release_tau(epsilon: float, delta: float, sensitivity: float) -> float:
    """The noise SD of a site's noisy-score release (the sites' own rule, :func:`dsroc.privacy.lattice.lattice_gaussian`)."""
    from dsroc.privacy.lattice import lattice_gaussian

    return lattice_gaussian(epsilon, delta, sensitivity).sigma


def paper_setting_refusal(epsilon: float, delta: float, sensitivities: dict[str, tuple[float, str]], *,
                          max_epsilon: float, max_delta: float, tolerance: float = DEFAULT_TOLERANCE,
                          table: str | Path | None = None) -> str | None:
    """Why the paper protocol must not run at (``epsilon``, ``delta``) on these sites, with the settings that work;
    None when it may.

    ``sensitivities``: each site's Delta and where it comes from (e.g. "rule 'range'"); ``max_epsilon``, ``max_delta``: the smallest caps per
    release of the sites. It may run when the sites' noise SD tau (the largest, at the largest Delta) is at most
    :func:`noise_ceiling`, or (epsilon, delta) is a setting the study recommends for that Delta
    (:func:`recommend_settings`). Elsewhere the noise pulls the ROC-GLM AUC towards 0.5 by more than the study's
    tolerance, while its interval covers sampling only, and the noise-corrected AUC's coverage was not shown: the
    answer would be confidently wrong.
    """
    site, (delta_max, rule) = max(sensitivities.items(), key=lambda kv: kv[1][0])
    try:
        tau = _release_tau(epsilon, delta, delta_max)
    except ValueError:  # almost noiseless: the sites refuse it themselves
        return None
    ceiling = noise_ceiling(tolerance=tolerance, table=table)
    if tau <= ceiling * (1.0 + 1e-9):
        return None
    try:
        if any(math.isclose(s.epsilon, epsilon, rel_tol=1e-9) and math.isclose(s.delta, delta, rel_tol=1e-9)
               for s in recommend_settings(delta_max, tolerance=tolerance, table=table)):
            return None
    except ValueError:
        pass
    works = []
    try:
        listed = recommend_settings(delta_max, tolerance=tolerance, table=table, max_epsilon=max_epsilon,
                                    max_delta=max_delta)
        works.append(f"(epsilon, delta) the study recommends for Delta {listed[0].studied_sensitivity:g}: "
                     + ", ".join(f"({s.epsilon:g}, {s.delta:g})" for s in listed))
    except ValueError:
        pass
    if _release_tau(max_epsilon, delta, delta_max) <= ceiling:
        lo, hi = float(epsilon), float(max_epsilon)  # tau falls as epsilon grows: the smallest epsilon that works
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if _release_tau(mid, delta, delta_max) <= ceiling else (mid, hi)
        works.append(f"epsilon >= {math.ceil(hi * 100) / 100:g} at delta {delta:g} (tau <= {ceiling:.3g}; within the "
                     f"sites' limit epsilon <= {max_epsilon:g})")
    else:
        unit = _release_tau(epsilon, delta, 1.0) / 1.0
        needed = ceiling / unit
        digits = -int(math.floor(math.log10(needed))) + 1
        works.append(f"sites whose sensitivity is at most {math.floor(needed * 10**digits) / 10**digits:g} (policy "
                     f"sensitivity = \"value\" with sensitivity_value at most that: no epsilon up to the sites' limit "
                     f"{max_epsilon:g} at delta {delta:g} brings the noise of Delta {delta_max:g} down far enough)")
    works.append("or the histogram protocol (protocol 'histogram', every answer differentially private, its "
                 "intervals include the noise)")
    return (f"the paper protocol at epsilon {epsilon:g}, delta {delta:g} gives its noisy scores a noise SD tau = "
            f"{tau:.3g} (sensitivity {delta_max:g} at site {site}: {rule}), above the tau <= {ceiling:.3g} "
            f"at which the simulation study kept the ROC-GLM AUC within {tolerance:g} of the truth: the noise would "
            "pull the AUC towards 0.5 beyond its interval (which covers sampling only) and the noise-corrected AUC's "
            f"coverage is not known there. Settings that work: {'; '.join(works)}. To run it anyway, outside the "
            "study (the AUC may be biased beyond its interval): outside_study=True (--outside-study)")
