"""The secagg protocol at the analyst: secure-aggregation rounds, the sum's post-processing as the histogram protocol's."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsroc.histogram.estimates import DEFAULT_ESTIMATOR
from dsroc.histogram.stages import policy_candidates, second_stage_grid
from dsroc.secagg.calibrations import cached_two_stage_plan
from dsroc.histogram.validation import histogram_validation
from dsroc.privacy.distributed import summed_noise_variance

from analyst.protocols.base import Protocol, ProtocolOptions, ValidationRequest, check_a0, site_privacy_from_budget
from analyst.protocols.histogram.detail import two_modes_lines
from analyst.protocols.histogram.protocol import summed_result
from analyst.protocols.histogram.release import allowed_n_bins, check_grid_options, fine_release
from analyst.protocols.histogram.secagg_rounds import SecAggSum, among, cancel_follow_ups, collect_secagg, round_colluders
from analyst.result import ValidationResult
from analyst.result.parts import num
from analyst.result.summary import fmt

__all__ = ["SECAGG_GUARANTEE", "PER_SITE", "SecAggDetail", "SecAggOptions", "SecAggProtocol"]

SECAGG_GUARANTEE = (
    "secagg protocol: the sites' per-class counts are summed under pairwise masks (Bonawitz et al. 2017), so the "
    "analyst sees only the sum; each site adds a share of a distributed discrete Gaussian noise, sized so that the "
    "shares of the sites outside any coalition of t sites with the analyst make the sum (epsilon, delta)-DP under "
    "add/remove-one-patient adjacency (charged to every site's ledger); every number below is post-processing of the sum"
)
PER_SITE = "per-site results are unavailable by design: the analyst sees only the sum over the sites"


@dataclass(frozen=True)
class SecAggOptions(ProtocolOptions):
    """Options of the secagg protocol.

    Parameters
    ----------
    n_bins : int, optional
        Bins of the grid. Default with ``spacing="quantile"``: as the histogram protocol, from the first round's
        estimated class sizes and the second round's summed noise (:func:`dsroc.histogram.stages.second_stage_bins`,
        5 to 12, one more step where a class's first round has two modes, at most what every site's policy
        allows); else the simulation study's count for the noise
        (:func:`analyst.protocols.histogram.release.allowed_n_bins`), or the nearest count every site allows.
    spacing : {"quantile", "equal", "logit"}, default "quantile"
        ``"quantile"``: a first secure-aggregation round of both classes' scores on a fine grid (about a tenth of
        the budget) places the second round's bins at the quantiles of the classes' balanced mixture ``(F0 + F1)/2``
        (:func:`dsroc.histogram.stages.second_stage_grid`, as the histogram protocol), and its summed counts shape
        the resolved AUC and the slope's range within each bin; both rounds are charged and compose to the
        request's epsilon and delta (:func:`dsroc.histogram.stages.two_stage_plan`). ``"equal"`` or ``"logit"``:
        one round on a fixed grid over the score range.
    score_sums : bool, default True
        Also sum each bin's noisy score offsets per class (counts and sums share one noise scale within
        the round's epsilon): calibration, O/E, Brier and the slope at within-bin mean scores.
    estimator : {"rocglm", "empirical"}
        The reported AUC: the ROC-GLM through the bin edges where plausible (default), or the binned one.
    colluders : int, optional
        The coalition size t the noise shares are sized for (default: the largest any site's policy
        requires, ``secagg_colluders``).
    dropouts : int, default 0
        How many sites may fail to mask without aborting a round: the survivors' sum is recovered without them
        (their pairwise masks removed by the survivors' pairwise seeds; docs/privacy.md), at the price of shares
        sized for the fewest survivors (``sites - dropouts - colluders`` honest shares) and of no free replay.
        0: any dropout aborts the round and nothing is charged.
    a0 : float, optional
        Also test ``H0: AUC <= a0``.
    """

    n_bins: int | None = None
    spacing: str = "quantile"
    score_sums: bool = True
    estimator: str = DEFAULT_ESTIMATOR
    colluders: int | None = None
    dropouts: int = 0
    a0: float | None = None

    def __post_init__(self):
        check_grid_options(self.n_bins, self.spacing, self.estimator)
        if self.colluders is not None and (isinstance(self.colluders, bool) or int(self.colluders) != self.colluders
                                           or self.colluders < 0):
            raise ValueError(f"colluders must be a non-negative integer, got {self.colluders!r}")
        if isinstance(self.dropouts, bool) or int(self.dropouts) != self.dropouts or self.dropouts < 0:
            raise ValueError(f"dropouts must be a non-negative integer, got {self.dropouts!r}")
        check_a0(self.a0)


@dataclass(frozen=True)
class SecAggDetail:
    """What only the secagg protocol has: the round's sum and how its noise was made.

    Attributes
    ----------
    validation : dsroc.histogram.validation.HistogramValidation
        Every estimate from the summed counts.
    round : analyst.protocols.histogram.secagg_rounds.SecAggSum
        The unmasked sum, the share sigma, the coalition size and each site's answer.
    n_bins : int
    spacing : str
    grid_round : SecAggSum or None
        With ``spacing="quantile"``: the first round, whose summed counts placed the grid (charged too).
    """

    validation: Any
    round: SecAggSum
    n_bins: int
    spacing: str
    grid_round: SecAggSum | None = None

    def summary_lines(self, result, pct: int) -> list[str]:
        """Lines after the headline AUC: the binned AUC beside a ROC-GLM one."""
        v = self.validation
        lines = [] if v.estimator != "rocglm" else [
            f"{'AUC (binned)':<22} {fmt(v.auc_empirical)}   (ties within a bin count one half)"]
        if math.isfinite(v.auc_resolved):
            lines.append(f"{'AUC (resolved)':<22} {fmt(v.auc_resolved)}   (within-bin pairs ordered by the score sums)")
        return lines

    def detail_lines(self, result) -> list[str]:
        """The protocol's own lines at the end of the summary."""
        r, g = self.round, self.grid_round
        grid = (f"{self.n_bins} bins at the class-balanced quantiles of a first round ({g.edges.size - 1} fine bins "
                f"per class, summed noise SD {g.noise_sd:.3g} per cell; charged)" if g is not None
                else f"{self.n_bins} {self.spacing} bins")
        sums = " and per-bin score sums" if r.sums0 is not None else ""
        return [f"Secagg protocol: {grid}; {len(r.sites)} sites each added a share of sigma {r.share_sigma:.3g} to "
                f"their counts{sums} (sized for coalitions of {r.colluders} sites with the analyst); summed noise SD "
                f"{r.noise_sd:.3g} per cell; the rounds compose to the requested epsilon and delta per site", PER_SITE,
                *([] if g is None else two_modes_lines(g.counts0, g.counts1, g.noise_sd, g.edges)),
                *_dropped_lines(self)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        v, r, g = self.validation, self.round, self.grid_round
        return {"n_bins": int(self.n_bins), "spacing": self.spacing, "sigma": num(r.noise_sd),
                "share_sigma": num(r.share_sigma), "colluders": int(r.colluders), "per_site": PER_SITE,
                "edges": [num(e) for e in v.edges], "counts0": [num(c) for c in v.counts0],
                "counts1": [num(c) for c in v.counts1], "auc_empirical": num(v.auc_empirical),
                "auc_empirical_variance": num(v.auc_empirical_variance), "auc_resolved": num(v.auc_resolved),
                "score_sums": r.sums0 is not None, "sums_sigma": num(r.sums_sd), "unavailable": dict(v.unavailable),
                "sites": _site_answers(r), "dropped": list(_dropped(self)),
                "grid_round": None if g is None else {
                    "edges": [num(e) for e in g.edges], "sigma": num(g.noise_sd), "share_sigma": num(g.share_sigma),
                    "sites": _site_answers(g)}}


def _dropped(detail: SecAggDetail) -> tuple:
    """The sites that dropped out of either round (in neither sum after it, not charged for it)."""
    return tuple(dict.fromkeys((*(detail.grid_round.dropped if detail.grid_round else ()), *detail.round.dropped)))


def _dropped_lines(detail: SecAggDetail) -> list[str]:
    gone = _dropped(detail)
    return [] if not gone else [
        f"dropped out (not in the sum; the survivors removed their pairwise masks): {', '.join(gone)}"]


def _site_answers(r: SecAggSum) -> dict:
    return {name: {"release_id": a.release_id, "repeated": a.repeated, "honest_shares": int(a.honest_shares)}
            for name, a in r.sites.items()}


class SecAggProtocol(Protocol):
    """The sites' counts summed by secure aggregation; the analyst computes every estimate from the sum
    (:func:`dsroc.histogram_validation`, as the histogram protocol)."""

    name = "secagg"
    guarantee = SECAGG_GUARANTEE
    privacy_unit = "add or remove one patient"
    options_type = SecAggOptions

    def run(self, s, request: ValidationRequest, o: SecAggOptions, *, executor=None, timing=None) -> ValidationResult:
        timing = {} if timing is None else timing
        clock = time.perf_counter()
        t = round_colluders(s, o.colluders)
        allowed, n_bins, first = [p.histogram_bins for p in s.policies.values()], o.n_bins, None
        if o.spacing == "quantile":
            total, first = self._two_rounds(s, request, o, t, allowed)
        else:
            if n_bins is None:  # from the policies the sites sent with their sessions
                n_bins = allowed_n_bins(allowed, epsilon=request.epsilon, delta=request.delta, shares=len(s.sites) - t)
            total = collect_secagg(s, epsilon=request.epsilon, delta=request.delta, n_bins=n_bins, spacing=o.spacing,
                                   colluders=t, score_sums=o.score_sums, dropouts=o.dropouts)
        budgets = s.budget(delta=request.delta)
        timing["release"] = time.perf_counter() - clock
        clock, cpu = time.perf_counter(), time.thread_time()
        sums = {} if total.sums0 is None else dict(sums0=total.sums0, sums1=total.sums1, sums_sigma=total.sums_sd)
        if sums and first is not None:  # the first round, summed over the classes, as the histogram protocol's
            sums.update(grid_edges=first.edges, grid_counts=first.counts0 + first.counts1,
                        grid_sigma=math.sqrt(2.0) * first.noise_sd)
        v = histogram_validation(total.counts0, total.counts1, total.edges, sigma=total.noise_sd,
                                 estimator=o.estimator, level=request.level, **sums)
        share_sd = math.sqrt(summed_noise_variance(total.share_sigma, 1))
        privacy = {name: site_privacy_from_budget(
            budgets[name], epsilon=request.epsilon, delta=request.delta, noise_sd=share_sd, sensitivity=1.0,
            sensitivity_rule="count", formal_bound=True, n=math.nan, repeated=a.repeated)
            for name, a in total.sites.items()}
        result = summed_result(request.common(s, self), v, privacy, a0=o.a0, with_sums=bool(sums), timing=timing,
                               detail=SecAggDetail(v, total, int(total.edges.size - 1), o.spacing, first),
                               notes=(PER_SITE,))
        timing["analysis"], timing["analysis_cpu"] = time.perf_counter() - clock, time.thread_time() - cpu  # wall, CPU
        return result

    @staticmethod
    def _two_rounds(s, request: ValidationRequest, o: SecAggOptions, t: int, allowed):
        """The quantile grid: a first round of both classes' counts on a fine grid, the bins at the quantiles of the
        classes' balanced mixture (as many as :func:`dsroc.histogram.stages.second_stage_grid` gives for its
        estimated class sizes and the second round's summed noise unless ``o.n_bins``), then the second round with
        the score sums; both at :func:`dsroc.histogram.stages.two_stage_plan`'s split. Returns both rounds' sums."""
        stages = cached_two_stage_plan(request.epsilon, request.delta, score_sums=o.score_sums, cache=s.calibrations)
        second_round = dict(epsilon=stages.epsilon2, delta=stages.delta2, score_sums=o.score_sums,
                            summed_sigma=stages.sigma2)
        # the first round holds the second's budget too: no site is charged the first and then refuses the second
        spacing, first, (lo, hi) = fine_release(s, lambda **grid: collect_secagg(
            s, epsilon=stages.epsilon1, delta=stages.delta1, colluders=t, summed_sigma=stages.sigma1,
            following=second_round, dropouts=o.dropouts, **grid))
        try:  # the second round's summed noise: the plan's, the shares sized for k - d - t honest
            k = len(s.sites)
            interior = second_stage_grid(np.asarray(first.counts0, dtype=np.float64),
                                         np.asarray(first.counts1, dtype=np.float64), first.edges,
                                         stages.sigma2 * math.sqrt(k / (k - o.dropouts - t)),
                                         most=min(max(a) for a in allowed), n_bins=o.n_bins,
                                         candidates=policy_candidates(allowed, first.edges, spacing, lo=lo, hi=hi),
                                         first_sigma=first.noise_sd)
        except BaseException:
            cancel_follow_ups(s, first.follow_ups)
            raise
        # over the first round's survivors, with the dropouts left: the same fewest survivors, the same shares
        second = collect_secagg(among(s, first.sites), colluders=t, interior=interior, follow_ups=first.follow_ups,
                                dropouts=o.dropouts - len(first.dropped), **second_round)
        return second, first
