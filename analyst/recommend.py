"""Privacy settings recommended by the simulation study: which (epsilon, delta) keep the AUC accurate for a Delta (the
paper protocol), and which epsilon makes the histogram protocol's AUC interval narrow enough for a planned size."""

from __future__ import annotations

import csv
import math
import numbers
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

import numpy as np

__all__ = ["DEFAULT_TOLERANCE", "PLAN_BINS", "PLAN_EPSILONS", "RecommendedSetting", "WidthPlan", "recommend_settings",
           "recommendation_warning", "histogram_width_plan", "check_informative"]

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


#: The bin counts :func:`histogram_width_plan` also tries at the requested epsilon.
PLAN_BINS = (7, 10)
#: The epsilons :func:`histogram_width_plan` tries (those a site's policy allows), smallest first.
PLAN_EPSILONS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0)


@dataclass(frozen=True)
class WidthPlan:
    """The histogram protocol's AUC interval width planned for a validation's size (before anything is charged).

    Attributes
    ----------
    patients, events, sites : int
        The planned size: patients in all, positives among them, sites they are spread over.
    auc : float
        The AUC assumed for the planning (the model's separation).
    epsilon : float
        The requested epsilon per site.
    width : float
        Median width of the AUC interval at ``epsilon`` over the simulated validations
        (:func:`dsroc.histogram.planning.planned_auc_widths`).
    target : float
        The widest interval the analyst calls informative.
    widths : dict of float to float
        The median width at every epsilon tried.
    needed_epsilon : float or None
        The smallest epsilon of :data:`PLAN_EPSILONS` (at most ``max_epsilon``) whose median width is at most
        ``target`` (the requested one when it is); None when none is.
    max_epsilon : float
        The largest epsilon tried (the sites' policies' limit per release).
    by_bins : dict of int to float
        The median width at the requested epsilon with each bin count of ``PLAN_BINS`` asked for explicitly
        (``n_bins``): at a few hundred patients more bins than the default rule's can narrow the interval.
    """

    patients: int
    events: int
    sites: int
    auc: float
    epsilon: float
    width: float
    target: float
    widths: dict
    needed_epsilon: float | None
    max_epsilon: float
    by_bins: dict = None

    @property
    def best_bins(self) -> int | None:
        """The bin count of ``by_bins`` whose median width is at least a tenth narrower than the default's (the
        narrowest), or None."""
        better = {b: w for b, w in (self.by_bins or {}).items() if w <= 0.9 * self.width}
        return min(better, key=better.get) if better else None

    @property
    def informative(self) -> bool:
        """Whether the requested epsilon gives a median width at most the target."""
        return self.width <= self.target

    def __str__(self) -> str:
        head = (f"{self.patients} patients ({self.events} events) over {plural_sites(self.sites)}, AUC {self.auc:g}: "
                f"median AUC interval width {self.width:.3f} at epsilon {self.epsilon:g}")
        bins = self.best_bins
        if bins is not None:
            head += f" (n_bins={bins}: {self.by_bins[bins]:.3f})"
        if self.informative:
            return f"{head}, at most the {self.target:g} asked for"
        ways = [f"n_bins={b} would make it {w:.3f} at this epsilon" for b, w in (self.by_bins or {}).items()
                if w <= self.target][:1]
        if self.needed_epsilon is not None:
            ways.append(f"epsilon {self.needed_epsilon:g} would make it {self.widths[self.needed_epsilon]:.3f}")
        if not ways:
            return (f"{head}, wider than the {self.target:g} asked for, and still wider at the largest epsilon every "
                    f"site allows ({self.max_epsilon:g}: {self.widths[max(self.widths)]:.3f}); more patients are needed "
                    "(or the paper or secagg protocol)")
        return f"{head}, wider than the {self.target:g} asked for; " + "; ".join(ways)


def plural_sites(k: int) -> str:
    return f"{k} site" + ("" if k == 1 else "s")


def histogram_width_plan(patients: int, events: int, sites: int, epsilon: float, target: float, *,
                         auc: float = 0.75, max_epsilon: float = 10.0, allowed_bins=None, logit_range=None,
                         reps: int = 10, seed: int = 0, bins=PLAN_BINS, n_bins: int | None = None) -> WidthPlan:
    """The median AUC interval width of the default histogram protocol at ``epsilon`` for a planned size, and the
    smallest epsilon of :data:`PLAN_EPSILONS` up to ``max_epsilon`` whose median width is at most ``target``
    (:func:`dsroc.histogram.planning.planned_auc_widths`, ``reps`` simulated validations each, the same patients and
    noise streams at every epsilon; the epsilons are searched by bisection, the width falling with epsilon).
    ``allowed_bins``, ``logit_range``: the bin counts and logit range every site's policy allows (default the
    default policy's); ``n_bins``: the request's bin count (default the protocol's rule); ``bins``: bin counts also
    tried at ``epsilon`` without one (``WidthPlan.by_bins``)."""
    from dsroc.histogram.planning import DEFAULT_LOGIT_RANGE, DEFAULT_POLICY_BINS, planned_auc_widths

    if not (isinstance(target, numbers.Real) and math.isfinite(target) and 0 < target <= 1):
        raise ValueError(f"max_auc_width must be a number in (0, 1], got {target!r}")
    options = dict(auc=auc, allowed_bins=tuple(allowed_bins or DEFAULT_POLICY_BINS),
                   logit_range=tuple(logit_range or DEFAULT_LOGIT_RANGE), reps=reps, seed=seed)
    asked_bins = {} if n_bins is None else {"n_bins": int(n_bins)}
    widths: dict[float, float] = {}

    def width(eps: float) -> float:
        if eps not in widths:
            widths[eps] = float(np.median(planned_auc_widths(patients, events, sites, eps, **options, **asked_bins)))
        return widths[eps]

    asked = width(float(epsilon))
    needed = float(epsilon) if asked <= target else None
    if needed is None:
        tried = [e for e in PLAN_EPSILONS if float(epsilon) < e <= max_epsilon]
        lo, hi = 0, len(tried)  # the first informative epsilon lies in tried[lo:hi], or none does
        while lo < hi:
            mid = (lo + hi) // 2
            if width(tried[mid]) <= target:
                hi = mid
            else:
                lo = mid + 1
        needed = tried[lo] if lo < len(tried) else None
        if needed is None and tried:
            width(tried[-1])
    by_bins = {int(b): float(np.median(planned_auc_widths(patients, events, sites, float(epsilon), n_bins=int(b),
                                                          **options)))
               for b in bins if int(b) <= max(options["allowed_bins"]) and n_bins is None}
    return WidthPlan(int(patients), int(events), int(sites), float(auc), float(epsilon), asked, float(target),
                     dict(sorted(widths.items())), needed, float(max_epsilon), by_bins)


def check_informative(plan: WidthPlan) -> None:
    """Refuse a request whose planned AUC interval is wider than its target (ValueError naming ``max_auc_width``,
    the planned width and the epsilon that would do): raised before any site holds or charges anything."""
    if not plan.informative:
        raise ValueError(f"max_auc_width: the answer would be uninformative: {plan} (simulated validations of the "
                         "planned size through the default protocol; 'dsroc recommend --protocol histogram' lists "
                         "them); nothing was held or charged at any site")
