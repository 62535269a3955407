"""The histogram protocol at the analyst: collect the sites' noisy histograms, sum them, validate by post-processing."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dsroc import analytic_gaussian_sigma
from dsroc.histogram.estimates import DEFAULT_ESTIMATOR
from dsroc.histogram.grid import recommended_n_bins
from dsroc.histogram.validation import histogram_validation
from dsroc.v1 import site_pb2 as pb

__all__ = ["HISTOGRAM_GUARANTEE", "PAPER_GUARANTEE", "HistogramSite", "HistogramResult", "collect_histograms", "default_n_bins",
           "validate_histogram"]

HISTOGRAM_GUARANTEE = (
    "histogram protocol: each site's whole answer is one (epsilon, delta)-DP release under add/remove-one-patient "
    "adjacency (discrete Gaussian noise on per-class counts, charged to the site's ledger); every number below is "
    "post-processing of those releases"
)
PAPER_GUARANTEE = (
    "paper protocol: only the noisy score releases are (epsilon, delta)-DP (at the sites' sensitivity rule); the "
    "ROC-GLM parts, placement moments, Brier sums, calibration and confusion counts are exact answers guarded by "
    "the privacy level q and query caps: q-protected, not differentially private"
)


@dataclass(frozen=True)
class HistogramSite:
    """One site's histogram release: noisy counts, noise, guarantee and its budget after the release."""

    negatives: np.ndarray
    positives: np.ndarray
    sigma: float
    noise_sd: float
    epsilon: float
    delta: float
    release_id: str
    repeated: bool
    epsilon_spent: float
    scalars: Mapping[str, float]
    scalar_sd: float
    negative_sums: np.ndarray | None = None
    positive_sums: np.ndarray | None = None
    sums_sd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        sums = {} if self.negative_sums is None else {
            "negative_sums": self.negative_sums.tolist(), "positive_sums": self.positive_sums.tolist(),
            "sums_sd": self.sums_sd}
        return {**sums, "negatives": self.negatives.tolist(), "positives": self.positives.tolist(), "sigma": self.sigma,
                "noise_sd": self.noise_sd, "epsilon": self.epsilon, "delta": self.delta,
                "release_id": self.release_id, "repeated": self.repeated, "epsilon_spent": self.epsilon_spent,
                "scalars": dict(self.scalars), "scalar_sd": self.scalar_sd}


def collect_histograms(session, *, epsilon: float, delta: float, n_bins: int, spacing: str,
                       scalars: tuple[str, ...], score_sums: bool = False) -> tuple[np.ndarray, dict[str, HistogramSite]]:
    """Ask every site of a :class:`analyst.session.ValidationSession` for its histogram release.

    Returns the public grid (every site must use the same) and each site's release.
    """
    def request(conn, held):
        return pb.HistogramRequest(session_id=session.session_ids[conn.name], epsilon=float(epsilon),
                                   delta=float(delta), n_bins=int(n_bins), spacing=spacing, scalars=list(scalars),
                                   score_sums=bool(score_sums), reservation_id=held)

    def ask(conn, held):
        r = conn.call("ReleaseHistogram", request(conn, held))
        if score_sums and len(r.negative_sums) != n_bins:
            raise ValueError(f"site {conn.name} did not release the per-bin score sums asked for (an older site?)")
        sums = ((np.asarray(r.negative_sums, dtype=np.float64), np.asarray(r.positive_sums, dtype=np.float64),
                 r.sums_noise_sd) if score_sums else (None, None, 0.0))
        site = HistogramSite(
            np.asarray(r.negatives, dtype=np.int64), np.asarray(r.positives, dtype=np.int64), r.sigma, r.noise_sd,
            r.epsilon, r.delta, r.release_id, r.repeated, r.epsilon_spent, {s.name: s.value for s in r.scalars},
            max([s.noise_sd for s in r.scalars], default=0.0), *sums)
        session.progress("histogram release", conn.name, f"{n_bins} bins, noise SD {r.noise_sd:.3g}")
        return np.asarray(r.edges, dtype=np.float64), site

    # All or nothing: every site checks the request and holds its budget before any site releases.
    holds = session.hold("histogram release", lambda c: pb.PrepareRequest(histogram=request(c, "")))
    replies = session.commit("histogram release", holds, ask)
    edges = replies[0][0]
    for (other, _), name in zip(replies, session.sites):
        if other.shape != edges.shape or not np.allclose(other, edges, rtol=0, atol=1e-12):
            raise ValueError(f"site {name} used another grid than {session.sites[0]} (different score ranges?); "
                             "histograms on different grids cannot be summed")
    return edges, {name: site for name, (_, site) in zip(session.sites, replies)}


@dataclass
class HistogramResult:
    """A validation by the histogram protocol: the sites' releases and everything derived from their sum.

    Attributes
    ----------
    validation : dsroc.histogram.validation.HistogramValidation
        AUC, ROC/PR, Brier, calibration, confusion at any edge; intervals include the privacy noise.
    releases : dict of str to HistogramSite
        Each site's release (noisy counts, noise, epsilon and delta, budget spent after it).
    sigma : float
        Noise SD of each summed cell, ``sqrt(sum of the sites' noise variances)``.
    """

    dataset: str
    outcome: str
    score_source: str
    sites: tuple[str, ...]
    epsilon: float
    delta: float
    n_bins: int
    spacing: str
    validation: Any
    releases: Mapping[str, HistogramSite]
    sigma: float
    timing: Mapping[str, float] = field(default_factory=dict)
    level: float = 0.95
    protocol: str = "histogram"
    privacy_unit: str = "add or remove one patient"
    covered: str = HISTOGRAM_GUARANTEE

    __test__ = False

    @property
    def auc(self) -> float:
        return self.validation.auc

    @property
    def auc_ci(self) -> tuple[float, float]:
        return self.validation.auc_ci

    @property
    def pr(self):
        """PR curve, AP and AUCPR with 95% intervals and the unachievable region, from the consistent summed
        histograms (:func:`analyst.pr.pr_from_counts`; post-processing of the releases)."""
        from analyst.pr import pr_from_counts

        v = self.validation
        return pr_from_counts(v.counts0, v.counts1, v.edges)

    @property
    def title(self) -> str:
        """One line for plot titles: the protocol and its guarantee."""
        return (f"histogram protocol, ({self.epsilon:g}, {self.delta:g})-DP per site, "
                f"unit: {self.privacy_unit}")

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dictionary."""
        v = self.validation

        def num(x):
            x = float(x)
            return x if math.isfinite(x) else None

        def estimate(e):
            return None if e is None else {"value": num(e.value), "variance": num(e.variance),
                                           "ci": [num(e.lower), num(e.upper)]}

        return {
            "protocol": self.protocol, "privacy_unit": self.privacy_unit, "covered": self.covered,
            "epsilon": self.epsilon, "delta": self.delta, "dataset": self.dataset, "outcome": self.outcome,
            "score_source": self.score_source, "sites": list(self.sites), "n_bins": self.n_bins,
            "spacing": self.spacing, "sigma": self.sigma, "level": self.level, "edges": v.edges.tolist(),
            "auc": num(v.auc), "auc_ci": [num(v.auc_ci[0]), num(v.auc_ci[1])], "auc_variance": num(v.auc_variance),
            "auc_estimator": v.estimator, "auc_empirical": num(v.auc_empirical),
            "auc_resolved": num(v.auc_resolved), "n0": num(v.n0), "n1": num(v.n1),
            "brier": estimate(v.brier), "brier_scalar": estimate(v.brier_scalar), "oe": estimate(v.oe),
            "counts0": v.counts0.tolist(), "counts1": v.counts1.tolist(), "notes": list(v.notes),
            "unavailable": dict(v.unavailable),
            "releases": {name: r.to_dict() for name, r in self.releases.items()},
            "timing": {k: num(t) for k, t in self.timing.items()},
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialise :meth:`to_dict`; write it to ``path`` when given. Returns the JSON text."""
        import json

        text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    def plot(self, *, axes=None):
        """The ROC points at the bin edges and the calibration curve, titled with the protocol's guarantee."""
        from analyst.display import pyplot

        if axes is None:
            fig, axes = pyplot().subplots(1, 2, figsize=(11, 5))
        v = self.validation
        axes[0].plot(v.fpr, v.tpr, marker="o", ms=3, label=f"AUC {v.auc:.3f} [{v.auc_ci[0]:.3f}, {v.auc_ci[1]:.3f}]")
        axes[0].plot([0, 1], [0, 1], ls=":", color="grey")
        axes[0].set(xlabel="false-positive fraction", ylabel="true-positive fraction", title="ROC (bin edges)",
                    aspect="equal")
        axes[0].legend(loc="lower right")
        if v.calibration is not None:
            c = v.calibration
            axes[1].errorbar(c.predicted, c.observed, yerr=[c.observed - c.lower, c.upper - c.observed], fmt="o")
        axes[1].plot([0, 1], [0, 1], ls=":", color="grey")
        axes[1].set(xlabel="predicted", ylabel="observed", title="Calibration", aspect="equal")
        axes[0].figure.suptitle(self.title, fontsize=10)
        return axes

    def __str__(self) -> str:
        v = self.validation
        pct = f"{round(100 * self.level)}%"
        lines = [
            f"Distributed validation of {self.score_source} on dataset '{self.dataset}', outcome '{self.outcome}'",
            f"  sites: {', '.join(self.sites)}   estimated n0 = {v.n0:.0f}, n1 = {v.n1:.0f} (from the noisy counts)",
            f"  protocol: histogram   privacy unit: {self.privacy_unit}   epsilon = {self.epsilon:g}, "
            f"delta = {self.delta:g} per site",
            f"  covered: every number below is post-processing of the sites' DP releases "
            f"({self.n_bins} {self.spacing} bins, summed noise SD {self.sigma:.3g} per cell)",
            "",
            f"AUC ({v.estimator})      {v.auc:.4f}   {pct} CI [{v.auc_ci[0]:.4f}, {v.auc_ci[1]:.4f}] "
            f"(SE {math.sqrt(v.auc_variance):.4f}, sampling and privacy noise)",
            f"AUC (binned)          {v.auc_empirical:.4f}",
        ]
        if math.isfinite(v.auc_resolved):
            lines.append(f"AUC (resolved)        {v.auc_resolved:.4f}   (within-bin pairs ordered by the score sums)")
        if v.brier is not None:
            lines.append(f"Brier score (binned)  {v.brier.value:.4f}   CI [{v.brier.lower:.4f}, {v.brier.upper:.4f}]")
        if v.brier_scalar is not None:
            lines.append(f"Brier score           {v.brier_scalar.value:.4f}   CI [{v.brier_scalar.lower:.4f}, "
                         f"{v.brier_scalar.upper:.4f}] (scalar release)")
        if v.oe is not None:
            lines.append(f"O/E                   {v.oe.value:.4f}   CI [{v.oe.lower:.4f}, {v.oe.upper:.4f}]")
        w = max([4] + [len(n) for n in self.releases])
        lines += ["", f"Privacy per site (one release each, charged to the site's ledger)",
                  f"  {'site':<{w}}  {'sigma':<8} {'noise SD':<9} {'epsilon':<8} {'delta':<8} epsilon spent (budget delta)"]
        for name, r in self.releases.items():
            lines.append(f"  {name:<{w}}  {r.sigma:<8.4g} {r.noise_sd:<9.4g} {r.epsilon:<8g} {r.delta:<8g} "
                         f"{r.epsilon_spent:.3g}{' (repeat, no charge)' if r.repeated else ''}")
        lines += [f"  {n}" for n in v.notes]
        if v.unavailable:
            lines.append(f"  the releases above were charged to the sites' ledgers although {', '.join(v.unavailable)} "
                         "could not be estimated from them")
        return "\n".join(lines)


def default_n_bins(federation, *, epsilon: float, delta: float) -> int:
    """The simulation study's bin count for the noise of one (epsilon, delta) release, among those all sites allow.

    :func:`dsroc.histogram.grid.recommended_n_bins` at the per-site noise SD (the analytic Gaussian sigma at
    sensitivity 1, within a few per cent of the discrete one, far inside the rule's steps); when a site's
    policy does not list that count, the nearest count every answering site allows (ties: the smaller).
    """
    policies = [answer["policy"]["histogram_bins"] for answer in federation.describe().values()]
    return _allowed_n_bins(policies, epsilon=epsilon, delta=delta)


def _allowed_n_bins(allowed_per_site, *, epsilon: float, delta: float) -> int:
    """:func:`default_n_bins` from each site's allowed bin counts."""
    wanted = recommended_n_bins(analytic_gaussian_sigma(epsilon, delta, 1.0))
    sets = [set(a) for a in allowed_per_site]
    allowed = set.intersection(*sets) if sets else set()
    if not allowed or wanted in allowed:
        return wanted
    return min(allowed, key=lambda b: (abs(b - wanted), b))


def validate_histogram(federation, dataset: str, outcome: str, *, score=None, model=None, epsilon: float,
                       delta: float, n_bins: int | None = None, spacing: str = "equal", scalars: tuple[str, ...] = (),
                       score_sums: bool = True, estimator: str = DEFAULT_ESTIMATOR,
                       alpha: float = 0.05, progress=None) -> HistogramResult:
    """The histogram protocol over a federation (see :meth:`analyst.Federation.validate`)."""
    started = time.perf_counter()
    with federation.session(dataset, outcome, score=score, model=model, progress=progress) as s:
        opened = time.perf_counter()
        if n_bins is None:  # from the policies the sites sent with their sessions
            n_bins = _allowed_n_bins([p.histogram_bins for p in s.policies.values()], epsilon=epsilon, delta=delta)
        edges, releases = collect_histograms(s, epsilon=epsilon, delta=delta, n_bins=n_bins, spacing=spacing,
                                             scalars=tuple(scalars), score_sums=score_sums)
        released = time.perf_counter()
        source = s.score_source
        federation.close_later(s)
    h0 = np.sum([r.negatives for r in releases.values()], axis=0)
    h1 = np.sum([r.positives for r in releases.values()], axis=0)
    sigma = math.sqrt(sum(r.noise_sd**2 for r in releases.values()))
    sums = {name: sum(r.scalars[name] for r in releases.values()) for name in scalars}
    scalar_sigma = math.sqrt(sum(r.scalar_sd**2 for r in releases.values())) if scalars else None
    per_bin = {}
    if score_sums:
        per_bin = {"sums0": np.sum([r.negative_sums for r in releases.values()], axis=0),
                   "sums1": np.sum([r.positive_sums for r in releases.values()], axis=0),
                   "sums_sigma": math.sqrt(sum(r.sums_sd**2 for r in releases.values()))}
    validation = histogram_validation(h0, h1, edges, sigma=sigma, estimator=estimator, level=1 - alpha,
                                      sum_sq=sums.get("sum_sq"), sum_p=sums.get("sum_p"), sum_y=sums.get("sum_y"),
                                      scalar_sigma=scalar_sigma, **per_bin)
    done = time.perf_counter()
    timing = {"open": opened - started, "release": released - opened, "analysis": done - released,
              "total": done - started}
    return HistogramResult(dataset=dataset, outcome=outcome, score_source=source, sites=tuple(federation.names),
                           epsilon=float(epsilon), delta=float(delta), n_bins=int(n_bins), spacing=spacing,
                           validation=validation, releases=releases, sigma=sigma, timing=timing, level=1 - alpha)
