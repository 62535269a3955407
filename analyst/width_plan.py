"""How wide the histogram protocol's AUC interval will be for a planned size, and the epsilon that makes it narrow
enough: planned before anything is charged, from simulated validations through the default protocol."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["PLAN_BINS", "PLAN_EPSILONS", "WidthPlan", "check_informative", "histogram_width_plan"]

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
        head = (f"{self.patients} patients ({self.events} events) over {_plural_sites(self.sites)}, AUC {self.auc:g}: "
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


def _plural_sites(k: int) -> str:
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
