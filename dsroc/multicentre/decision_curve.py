"""Decision curves (Vickers and Elkin 2006) from per-class score histograms: net benefit at the bin edges.

Treating the patients whose predicted risk is at least ``t`` has net benefit
``NB(t) = TP(t)/n - FP(t)/n * t/(1 - t)``; "treat all" has ``pi - (1 - pi) t/(1 - t)`` and "treat none" 0.
A histogram with bins ``[e_j, e_{j+1})`` resolves exactly the thresholds at its edges: ``TP(e_j)`` and
``FP(e_j)`` are the counts of bins ``j ..`` of each class. The interval adds two variances: sampling
(the multinomial of (class, treated) over the n patients, delta method) and the release noise (each
bin's count of each class carries independent noise of known variance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["DecisionCurve", "decision_curve"]


@dataclass(frozen=True)
class DecisionCurve:
    """Net benefit of the model, of treating all and of treating none at each threshold, with intervals.

    Attributes
    ----------
    thresholds : ndarray
        Risk thresholds (the histogram's interior edges in (0, 1)).
    net_benefit, lower, upper : ndarray
        The model's net benefit and its interval (sampling and release noise).
    treat_all, treat_all_lower, treat_all_upper : ndarray
        Net benefit of treating everyone, and its interval. Treating no one has net benefit 0.
    prevalence : float
    n : float
        Patients (the released total; noisy under a noisy release).
    tp, fp, fn, tn : ndarray
        The confusion table at each threshold (patients at or above it by class, and below it), estimated counts.
    """

    thresholds: np.ndarray
    net_benefit: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    treat_all: np.ndarray
    treat_all_lower: np.ndarray
    treat_all_upper: np.ndarray
    prevalence: float
    n: float
    tp: np.ndarray | None = None
    fp: np.ndarray | None = None
    fn: np.ndarray | None = None
    tn: np.ndarray | None = None

    @property
    def sensitivity(self) -> np.ndarray:
        """Share of the positives treated at each threshold (``tp / (tp + fn)``; NaN where no positive is left)."""
        return _share(self.tp, self.tp + self.fn)

    @property
    def specificity(self) -> np.ndarray:
        """Share of the negatives not treated at each threshold (``tn / (tn + fp)``)."""
        return _share(self.tn, self.tn + self.fp)


def _share(part, whole) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(whole > 0, part / whole, np.nan)


def decision_curve(counts0, counts1, edges, *, noise_variance=0.0, level: float = 0.95,
                   thresholds=None) -> DecisionCurve:
    """Net benefit at each interior edge of a histogram of predicted risks, by class.

    Parameters
    ----------
    counts0, counts1 : array_like
        Counts per bin of the negatives and positives (summed over sites; noisy counts allowed, made
        non-negative by the caller's consistency step if wanted).
    edges : array_like
        Bin edges, increasing, within [0, 1].
    noise_variance : float or array_like, keyword-only
        Variance of the release noise of one bin count of one class (per bin, or one value), summed over
        sites; 0 for exact counts.
    level : float, keyword-only
        Coverage of the intervals.
    thresholds : sequence of float, optional
        Only these thresholds, each an interior edge (to :data:`dsroc.histogram.grid.EDGE_TOLERANCE`; e.g. a
        clinician's, put on the grid by ``HistogramOptions(thresholds=...)``); default every interior edge in (0, 1).
    """
    h0 = np.asarray(counts0, dtype=np.float64)
    h1 = np.asarray(counts1, dtype=np.float64)
    e = np.asarray(edges, dtype=np.float64)
    if h0.ndim != 1 or h0.shape != h1.shape or e.shape != (h0.size + 1,):
        raise ValueError(f"counts0 and counts1 need one count per bin and edges one more, got {h0.shape}, "
                         f"{h1.shape} and {e.shape}")
    if not (np.all(np.diff(e) > 0) and e[0] >= 0 and e[-1] <= 1):
        raise ValueError("edges must increase strictly within [0, 1]")
    var_noise = np.broadcast_to(np.asarray(noise_variance, dtype=np.float64), h0.shape)
    if not (np.isfinite(var_noise).all() and (var_noise >= 0).all()):
        raise ValueError("noise_variance must be finite and >= 0")
    n = float(h0.sum() + h1.sum())
    if n <= 0:
        raise ValueError("the histograms hold no patients")
    inner = (e > 0) & (e < 1)
    inner[-1] = False  # the last edge closes the last bin: nobody is at or above a threshold beyond it
    j = np.flatnonzero(inner)
    if thresholds is not None:
        j = _edge_indices(e, j, thresholds)
    t = e[j]
    odds = t / (1 - t)
    # patients at or above each edge, by class: reversed cumulative sums of the bins
    tp = np.cumsum(h1[::-1])[::-1][j]
    fp = np.cumsum(h0[::-1])[::-1][j]
    noise_tail = np.cumsum(var_noise[::-1])[::-1][j]  # noise variance of a tail sum of one class
    p11, p01 = tp / n, fp / n
    nb = p11 - odds * p01
    # multinomial: Var(p11 - w p01) = [p11(1-p11) + w^2 p01(1-p01) + 2 w p11 p01] / n; clip noisy shares
    a, b = np.clip(p11, 0, 1), np.clip(p01, 0, 1)
    # noise, delta method in every count including n: n dNB = dTP (1 - NB) - dFP (w + NB) - NB (dHead0 + dHead1)
    noise_head = var_noise.sum() - noise_tail
    var = ((a * (1 - a) + odds**2 * b * (1 - b) + 2 * odds * a * b) / n
           + (noise_tail * ((1 - nb) ** 2 + (odds + nb) ** 2) + 2 * noise_head * nb**2) / n**2)
    prevalence = float(h1.sum() / n)
    pi = min(max(prevalence, 0.0), 1.0)
    treat_all = prevalence - (1 - prevalence) * odds
    var_all = ((1 + odds) ** 2 * pi * (1 - pi) / n
               + var_noise.sum() * ((1 - treat_all) ** 2 + (odds + treat_all) ** 2) / n**2)
    z = stats.norm.ppf(0.5 + level / 2)
    sd, sd_all = np.sqrt(var), np.sqrt(var_all)
    n1, n0 = float(h1.sum()), float(h0.sum())
    return DecisionCurve(t, nb, nb - z * sd, nb + z * sd, treat_all, treat_all - z * sd_all, treat_all + z * sd_all,
                         prevalence, n, tp, fp, n1 - tp, n0 - fp)


def _edge_indices(e: np.ndarray, inner: np.ndarray, thresholds) -> np.ndarray:
    """The indices among the interior edges ``inner`` of ``e`` of each of ``thresholds`` (ValueError for one that is
    not an interior edge)."""
    from ..histogram.grid import EDGE_TOLERANCE

    out = []
    for t in np.atleast_1d(np.asarray(thresholds, dtype=np.float64)):
        at = inner[np.abs(e[inner] - t) <= EDGE_TOLERANCE] if inner.size else inner
        if at.size == 0:
            raise ValueError(f"thresholds: {float(t)!r} is not an interior edge of the histogram in (0, 1); put it on the grid "
                             "(HistogramOptions(thresholds=...))")
        out.append(int(at[0]))
    return np.asarray(out, dtype=np.int64)
