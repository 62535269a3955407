"""Planning a histogram validation before anything is charged: the decision thresholds on its grid, and
refusing a request whose AUC interval would be too wide to inform, with the epsilon that would do."""

from __future__ import annotations

from dsroc.histogram.thresholds import check_thresholds

from analyst.width_plan import check_informative

__all__ = ["check_informative", "check_planned", "planning_options", "width_plan"]


def planning_options(thresholds, spacing: str, max_auc_width, planned) -> dict:
    """The checked ``thresholds`` (sorted) and ``planned`` of :class:`HistogramOptions`; ValueError naming the field
    and the rule."""
    thresholds = check_thresholds(() if thresholds is None else thresholds)
    if thresholds and spacing != "quantile":
        raise ValueError(f"thresholds need spacing='quantile' (the default), got spacing={spacing!r}: an equal or "
                         "logit grid has fixed edges (choose n_bins so that they fall on the thresholds)")
    if (max_auc_width is None) != (planned is None):
        raise ValueError("max_auc_width and planned go together: the interval's width is planned for the stated "
                         "size (planned=(patients, events))")
    return {"thresholds": thresholds, "planned": None if planned is None else check_planned(planned)}


def check_planned(planned) -> tuple:
    """``(patients, events[, auc])`` of ``planned``: integers 0 < events < patients, auc in [0.5, 1) (default 0.75)."""
    values = tuple(planned) if isinstance(planned, (tuple, list)) else ()
    if len(values) not in (2, 3) or any(isinstance(v, bool) for v in values):
        raise ValueError(f"planned must be (patients, events) or (patients, events, auc), got {planned!r}")
    patients, events, auc = (*values, 0.75)[:3]
    if not (float(patients).is_integer() and float(events).is_integer() and 0 < events < patients):
        raise ValueError(f"planned: patients and events must be whole numbers with 0 < events < patients, got {planned!r}")
    if not 0.5 <= float(auc) < 1:
        raise ValueError(f"planned: the planning AUC must lie in [0.5, 1), got {auc!r}")
    return int(patients), int(events), float(auc)


def width_plan(s, request, o):
    """The planned AUC interval width of ``o.planned`` over the session's sites at the request's epsilon, within what
    every site's policy allows (bin counts, logit range, the largest epsilon per release)."""
    from analyst.width_plan import histogram_width_plan

    policies = [s.policies[name] for name in s.sites]
    ranges = {(p.histogram_logit_min, p.histogram_logit_max) for p in policies}
    patients, events, auc = o.planned
    return histogram_width_plan(patients, events, len(policies), request.epsilon, o.max_auc_width, auc=auc,
                                max_epsilon=min(p.max_epsilon for p in policies),
                                allowed_bins=sorted(set.intersection(*(set(p.histogram_bins) for p in policies))),
                                logit_range=next(iter(ranges)) if len(ranges) == 1 else None, n_bins=o.n_bins)
