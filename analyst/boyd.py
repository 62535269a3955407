"""Boyd, Lantz and Page's private AUC and average precision across sites (H-B1): each site releases, the analyst combines.

Each site releases its own smooth-sensitivity AUC and AP and a noisy count of positives
(:rpc:`ReleaseBoydStatistics`, charged to the site's ledger); the analyst's estimate is the weighted
mean over sites (weights ``n1~ n0~`` for the AUC, ``n1~`` for AP): the *within-site* (stratified)
statistic, which equals the pooled one only when the sites' score distributions agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from dsroc.mechanisms import combine_site_releases
from dsroc.mechanisms._common import check_delta, check_epsilon
from dsroc.v1 import site_pb2 as pb

__all__ = ["BoydSiteRelease", "BoydResult", "boyd_validation"]


@dataclass(frozen=True)
class BoydSiteRelease:
    """One site's answer (see ``BoydResponse`` in the proto)."""

    auc: float
    average_precision: float
    n1_noisy: float
    n: int
    epsilon: float
    delta: float
    privacy_unit: str
    repeated: bool


@dataclass
class BoydResult:
    """The combined estimates, per-site releases, and the guarantee they carry."""

    dataset: str
    outcome: str
    auc: float
    average_precision: float
    epsilon: float
    delta: float
    privacy_unit: str
    sites: Mapping[str, BoydSiteRelease] = field(default_factory=dict)
    estimand: str = "within-site (stratified) AUC and AP, weighted by the noisy class counts"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view."""
        return {
            "dataset": self.dataset, "outcome": self.outcome, "auc": self.auc,
            "average_precision": self.average_precision, "epsilon": self.epsilon, "delta": self.delta,
            "privacy_unit": self.privacy_unit, "estimand": self.estimand,
            "sites": {name: vars(r) for name, r in self.sites.items()},
        }

    def __str__(self) -> str:
        return (f"Boyd smooth-sensitivity release on '{self.dataset}' (outcome '{self.outcome}'): AUC {self.auc:.4f}, "
                f"AP {self.average_precision:.4f} ({self.estimand}); per site (epsilon {self.epsilon:g}, "
                f"delta {self.delta:g}); privacy unit: {self.privacy_unit}")


def boyd_validation(federation, dataset: str, outcome: str, *, score: str | None = None, model=None,
                    epsilon: float, delta: float, count_share: float = 0.0) -> BoydResult:
    """Ask every site of ``federation`` for its Boyd release and combine them.

    Parameters
    ----------
    federation : analyst.Federation
    dataset, outcome, score, model
        As for :meth:`analyst.Federation.validate`.
    epsilon, delta : float
        Per site, for the whole release (AUC, AP and count), 0 < delta < 1 (Laplace noise).
    count_share : float, default 0 (the site's 0.1)
        Share of epsilon spent on the noisy count of positives.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    if delta == 0.0:
        raise ValueError("delta must lie in (0, 1): the sites release the Laplace (approximate-DP) variant")
    if not (count_share == 0.0 or 0.0 < count_share < 1.0):
        raise ValueError(f"count_share must be 0 (site default) or lie strictly between 0 and 1, got {count_share}")
    with federation.session(dataset, outcome, score=score, model=model) as session:
        def request(conn, held):
            return pb.BoydRequest(session_id=session.session_ids[conn.name], epsilon=float(epsilon),
                                  delta=float(delta), count_share=float(count_share), reservation_id=held)

        def ask(conn, held):
            r = conn.call("ReleaseBoydStatistics", request(conn, held))
            return BoydSiteRelease(r.auc, r.average_precision, r.n1_noisy, int(r.n), r.epsilon, r.delta,
                                   r.privacy_unit, r.repeated)

        holds = session.hold("boyd release", lambda c: pb.PrepareRequest(boyd=request(c, "")))
        replies = dict(zip(session.sites, session.commit("boyd release", holds, ask)))
    values = np.array([[r.auc, r.average_precision] for r in replies.values()])
    n1 = np.array([r.n1_noisy for r in replies.values()])
    n = np.array([r.n for r in replies.values()])
    auc = combine_site_releases(values[:, 0], n1, n, statistic="auc")
    ap = combine_site_releases(values[:, 1], n1, n, statistic="ap")
    units = {r.privacy_unit for r in replies.values()}
    return BoydResult(dataset, outcome, float(auc), float(ap), float(epsilon), float(delta),
                      units.pop() if len(units) == 1 else "; ".join(sorted(units)), dict(replies))
