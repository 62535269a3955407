"""The secagg protocol at the analyst: one secure-aggregation round, the sum's post-processing as the histogram protocol's."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from dsroc.histogram.estimates import DEFAULT_ESTIMATOR, ESTIMATORS
from dsroc.histogram.validation import histogram_validation
from dsroc.privacy.distributed import summed_noise_variance

from analyst.parts import num
from analyst.protocols.base import Protocol, ProtocolOptions, ValidationRequest, check_a0, site_privacy_from_budget
from analyst.protocols.histogram import allowed_n_bins, summed_result
from analyst.protocols.secagg_rounds import SecAggSum, collect_secagg, round_colluders
from analyst.result import ValidationResult
from analyst.summary import fmt

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
        Bins of the grid; default: the simulation study's count for one site's share of the noise
        (:func:`analyst.protocols.histogram.allowed_n_bins`), or the nearest count every site allows.
    spacing : {"equal", "logit"}
        Grid spacing on the score range.
    estimator : {"rocglm", "empirical"}
        The reported AUC: the ROC-GLM through the bin edges where plausible (default), or the binned one.
    colluders : int, optional
        The coalition size t the noise shares are sized for (default: the largest any site's policy
        requires, ``secagg_colluders``).
    a0 : float, optional
        Also test ``H0: AUC <= a0``.
    """

    n_bins: int | None = None
    spacing: str = "equal"
    estimator: str = DEFAULT_ESTIMATOR
    colluders: int | None = None
    a0: float | None = None

    def __post_init__(self):
        if self.n_bins is not None and (isinstance(self.n_bins, bool) or int(self.n_bins) != self.n_bins
                                        or self.n_bins < 1):
            raise ValueError(f"n_bins must be a positive integer, got {self.n_bins!r}")
        if self.spacing not in ("equal", "logit"):
            raise ValueError(f"spacing must be 'equal' or 'logit', got {self.spacing!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.colluders is not None and (isinstance(self.colluders, bool) or int(self.colluders) != self.colluders
                                           or self.colluders < 0):
            raise ValueError(f"colluders must be a non-negative integer, got {self.colluders!r}")
        check_a0(self.a0)


@dataclass(frozen=True)
class SecAggDetail:
    """What only the secagg protocol has: the round's sum and how its noise was made.

    Attributes
    ----------
    validation : dsroc.histogram.validation.HistogramValidation
        Every estimate from the summed counts.
    round : analyst.protocols.secagg_rounds.SecAggSum
        The unmasked sum, the share sigma, the coalition size and each site's answer.
    n_bins : int
    spacing : str
    """

    validation: Any
    round: SecAggSum
    n_bins: int
    spacing: str

    def summary_lines(self, result, pct: int) -> list[str]:
        """Lines after the headline AUC: the binned AUC beside a ROC-GLM one."""
        v = self.validation
        return [] if v.estimator != "rocglm" else [
            f"{'AUC (binned)':<22} {fmt(v.auc_empirical)}   (ties within a bin count one half)"]

    def detail_lines(self, result) -> list[str]:
        """The protocol's own lines at the end of the summary."""
        r = self.round
        return [f"Secagg protocol: {self.n_bins} {self.spacing} bins; {len(r.sites)} sites each added a share of "
                f"sigma {r.share_sigma:.3g} (sized for coalitions of {r.colluders} sites with the analyst); summed "
                f"noise SD {r.noise_sd:.3g} per cell", PER_SITE]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        v, r = self.validation, self.round
        return {"n_bins": int(self.n_bins), "spacing": self.spacing, "sigma": num(r.noise_sd),
                "share_sigma": num(r.share_sigma), "colluders": int(r.colluders), "per_site": PER_SITE,
                "edges": [num(e) for e in v.edges], "counts0": [num(c) for c in v.counts0],
                "counts1": [num(c) for c in v.counts1], "auc_empirical": num(v.auc_empirical),
                "auc_empirical_variance": num(v.auc_empirical_variance), "unavailable": dict(v.unavailable),
                "sites": {name: {"release_id": a.release_id, "repeated": a.repeated,
                                 "honest_shares": int(a.honest_shares)} for name, a in r.sites.items()}}


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
        n_bins = o.n_bins
        if n_bins is None:  # from the policies the sites sent with their sessions
            n_bins = allowed_n_bins([p.histogram_bins for p in s.policies.values()], epsilon=request.epsilon,
                                    delta=request.delta, shares=len(s.sites) - t)
        total = collect_secagg(s, epsilon=request.epsilon, delta=request.delta, n_bins=n_bins, spacing=o.spacing,
                               colluders=t)
        budgets = s.budget()
        timing["release"] = time.perf_counter() - clock
        clock = time.perf_counter()
        v = histogram_validation(total.counts0, total.counts1, total.edges, sigma=total.noise_sd,
                                 estimator=o.estimator, level=request.level)
        share_sd = math.sqrt(summed_noise_variance(total.share_sigma, 1))
        privacy = {name: site_privacy_from_budget(
            budgets[name], epsilon=request.epsilon, delta=request.delta, noise_sd=share_sd, sensitivity=1.0,
            sensitivity_rule="count", formal_bound=True, n=math.nan, repeated=a.repeated)
            for name, a in total.sites.items()}
        result = summed_result(request.common(s, self), v, privacy, a0=o.a0, with_sums=False, timing=timing,
                               detail=SecAggDetail(v, total, int(n_bins), o.spacing), warnings=(PER_SITE,))
        timing["analysis"] = time.perf_counter() - clock
        return result
