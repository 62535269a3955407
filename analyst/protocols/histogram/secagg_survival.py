"""The survival validation under secure aggregation, and which protocol serves a survival validation.

One secagg round (:func:`analyst.protocols.histogram.secagg_rounds.collect_secagg`) sums the sites' (time bin x status
x score bin) counts, each with its discrete Gaussian share, on the time grid every site's policy lists; the analyst
sees only the sum. Every estimate is then the histogram protocol's post-processing
(:func:`dsroc.survival.validation.survival_validation`) of that sum, with the summed shares' noise SD.
"""

from __future__ import annotations

import math
import time

import numpy as np

from dsroc.privacy.distributed import summed_noise_variance
from dsroc.survival.release import decode_survival_release
from dsroc.survival.validation import survival_validation

from analyst.protocols.base import Protocol, ValidationRequest, site_privacy_from_budget
from analyst.protocols.histogram.secagg import PER_SITE
from analyst.protocols.histogram.secagg_rounds import collect_secagg, round_colluders
from analyst.protocols.histogram.survival import (SURVIVAL, SurvivalOptions, SurvivalProtocol, checked_time_grid,
                                                  uno_rule)
from analyst.protocols.histogram.survival_result import SurvivalDetail, survival_report

__all__ = ["SECAGG_SURVIVAL_GUARANTEE", "SecAggSurvivalProtocol", "SECAGG_SURVIVAL", "survival_strategy"]

SECAGG_SURVIVAL_GUARANTEE = (
    "survival release (secagg protocol): the sites' (time bin x status x score bin) counts are summed under pairwise "
    "masks (Bonawitz et al. 2017), so the analyst sees only the sum; each site adds a share of a distributed discrete "
    "Gaussian noise, sized so that the shares of the sites outside any coalition of t sites with the analyst make "
    "the sum (epsilon, delta)-DP under add/remove-one-patient adjacency (one patient is one count in one cell; "
    "charged to every site's ledger); every number below is post-processing of the sum"
)


class SecAggSurvivalProtocol(Protocol):
    """A survival validation by one secure-aggregation round of the sites' survival cells (counts only)."""

    name = "secagg"
    guarantee = SECAGG_SURVIVAL_GUARANTEE
    privacy_unit = "add or remove one patient"
    options_type = SurvivalOptions

    def check(self, request: ValidationRequest, o: SurvivalOptions) -> None:
        if o.risk_sums:
            raise ValueError("risk_sums: protocol 'secagg' sums the survival counts only (the cells' risk sums are "
                             "released by protocol='histogram'); give risk_sums=False")

    def run(self, s, request: ValidationRequest, o: SurvivalOptions, *, executor=None, timing=None):
        timing = {} if timing is None else timing
        clock = time.perf_counter()
        time_edges, uno = checked_time_grid(s.policies, o), uno_rule(s.policies, o)
        grid = dict(interior=list(o.edges)) if o.edges is not None else dict(n_bins=int(o.n_bins), spacing="equal")
        total = collect_secagg(s, epsilon=request.epsilon, delta=request.delta, colluders=round_colluders(s, None),
                               survival_edges=time_edges, **grid)
        budgets = s.budget()
        timing["release"] = time.perf_counter() - clock
        clock = time.perf_counter()
        k, j = total.time_edges.size - 1, total.edges.size - 1
        try:
            release = decode_survival_release(np.asarray(total.cells, dtype=np.int64).tobytes(), time_bins=k,
                                              score_bins=j, risk_sums=False)
        except ValueError as exc:
            raise ValueError(f"the secagg sum does not fit its advertised grids ({exc})") from None
        hist = release.histogram(total.time_edges, total.edges)
        v = survival_validation(hist, float(o.horizon), count_sd=total.noise_sd, sums_sd=0.0, sites=None, tau=uno.tau,
                                min_censoring=uno.min_censoring, auc_times=o.auc_times, level=request.level,
                                draws=int(o.draws), seed=o.seed, notes=uno.notes)
        share_sd = math.sqrt(summed_noise_variance(total.share_sigma, 1))
        privacy = {name: site_privacy_from_budget(
            budgets[name], epsilon=request.epsilon, delta=request.delta, noise_sd=share_sd, sensitivity=1.0,
            sensitivity_rule="count", formal_bound=True, n=math.nan, repeated=a.repeated)
            for name, a in total.sites.items()}
        detail = SurvivalDetail(v, request.time, {}, total.time_edges, total.edges, False,
                                noise=f"distributed discrete Gaussian, summed by secure aggregation over "
                                      f"{len(total.sites)} sites, (epsilon, delta)-DP against coalitions of "
                                      f"{total.colluders} sites with the analyst")
        result = survival_report(request.common(s, self), v, privacy, detail, timing=timing,
                                 on_edge=float(o.horizon) in time_edges, warnings=(PER_SITE,))
        timing["analysis"] = time.perf_counter() - clock
        return result


#: The survival validation's strategy under ``protocol="secagg"``.
SECAGG_SURVIVAL = SecAggSurvivalProtocol()

_STRATEGIES = {"histogram": SURVIVAL, "secagg": SECAGG_SURVIVAL}
#: why the other protocols refuse a survival validation
_NOT_SURVIVAL = {"paper": "the paper protocol's noisy scores and exact answers have no survival release"}


def survival_strategy(protocol: str, time_column, horizon, options, kwargs) -> tuple[SurvivalProtocol, dict]:
    """The survival strategy and its keyword options (``horizon`` among them unless ``options`` holds it), or a
    ``ValueError`` naming the field and the rule, before any site is asked."""
    if protocol not in _STRATEGIES:
        raise ValueError(f"protocol {protocol!r} cannot validate a survival outcome (time=): "
                         f"{_NOT_SURVIVAL.get(protocol, 'unknown protocol')}; use protocol='histogram' or 'secagg'")
    if not isinstance(time_column, str) or not time_column:
        raise ValueError(f"time must be a non-empty column name, got {time_column!r}")
    if options is not None:
        if not isinstance(options, SurvivalOptions):
            raise ValueError(f"options for a survival validation must be a SurvivalOptions, got "
                             f"{type(options).__name__}")
        if horizon is not None and horizon != options.horizon:
            raise ValueError(f"horizon={horizon!r} differs from the options' horizon {options.horizon!r}")
        return _STRATEGIES[protocol], dict(kwargs)
    return _STRATEGIES[protocol], {**kwargs, "horizon": horizon}
