"""The histogram protocol at the site: the public grid a request may use, and the noisy release itself."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

import dsroc  # bin_scores, histogram_edges: looked up at first use (dsroc.histogram.grid imports scipy.optimize)
from dsroc import analytic_gaussian_sigma
from dsroc.privacy.accounting import DiscreteGaussian

from .config import Policy
from .errors import FailedPrecondition, InvalidArgument, PermissionDenied

__all__ = ["PRIVACY_UNIT", "SCALARS", "SCALAR_RESOLUTION", "HistogramPlan", "plan_histogram", "require_protocol",
           "draw_histogram", "decode_histogram", "noise_sd"]

PRIVACY_UNIT = "add or remove one patient"
SCALARS = ("sum_sq", "sum_p", "sum_y")
# Each patient's scalar term in [0, 1] is rounded (randomly, unbiased) to a multiple of 1/16: an
# integer sum of sensitivity 16 that takes exact integer noise.
SCALAR_RESOLUTION = 16
# Largest noise SD per cell a histogram release may need (smaller epsilon is refused).
MAX_SIGMA = 1000.0


def require_protocol(policy: Policy, protocol: str) -> None:
    """Refuse a call of a protocol the site does not serve (FAILED_PRECONDITION naming the served ones)."""
    if protocol not in policy.protocols:
        raise FailedPrecondition(
            f"this site does not serve the {protocol!r} protocol; it serves {list(policy.protocols)} "
            "(site policy: protocols)"
        )


@dataclass(frozen=True)
class HistogramPlan:
    """A checked histogram request: its grid, scalars, noise and accountant events."""

    edges: np.ndarray
    n_bins: int
    spacing: str
    scalars: tuple[str, ...]
    epsilon: float
    delta: float
    sigma: float
    scalar_sigma: float

    @property
    def events(self) -> tuple:
        """The release's privacy events: the pair of histograms, then each scalar."""
        scalars = [DiscreteGaussian(self.scalar_sigma, SCALAR_RESOLUTION) for _ in self.scalars]
        return (DiscreteGaussian(self.sigma), *scalars)

    @property
    def request(self) -> str:
        """Canonical text of what makes two requests the same release."""
        return json.dumps({"epsilon": self.epsilon, "delta": self.delta, "edges": self.edges.tolist(),
                           "scalars": list(self.scalars)}, sort_keys=True)


def plan_histogram(policy: Policy, score_range, *, epsilon: float, delta: float, n_bins: int, spacing: str,
                   scalars, interval: float) -> HistogramPlan:
    """Check a histogram request against the policy and calibrate its noise.

    ``epsilon`` and ``delta`` must already be checked against the per-release caps.
    """
    if n_bins not in policy.histogram_bins:
        raise PermissionDenied(f"policy: n_bins {n_bins} is not one this site allows (histogram_bins = "
                               f"{list(policy.histogram_bins)})")
    spacing = spacing or "equal"
    if spacing not in ("equal", "logit"):
        raise InvalidArgument(f"spacing must be 'equal' or 'logit', got {spacing!r}")
    if spacing not in policy.histogram_spacings:
        raise PermissionDenied(f"policy: spacing {spacing!r} is not one this site allows (histogram_spacings = "
                               f"{list(policy.histogram_spacings)})")
    scalars = tuple(scalars)
    unknown = [s for s in scalars if s not in SCALARS]
    if unknown or len(set(scalars)) != len(scalars):
        raise InvalidArgument(f"scalars must be distinct names from {list(SCALARS)}, got {list(scalars)}")
    lo, hi = (float(v) for v in score_range)
    if spacing == "logit":
        if lo < 0.0 or hi > 1.0:
            raise InvalidArgument(f"spacing 'logit' needs probabilities; this score source's range is [{lo}, {hi}]")
        lo, hi = policy.histogram_logit_range
    if scalars and (lo < 0.0 or hi > 1.0):
        raise InvalidArgument(f"scalars need probabilities; this score source's range is [{lo}, {hi}]")
    from dsroc.privacy.noise import discrete_gaussian_sigma  # scipy.optimize: imported at the first histogram request

    edges = dsroc.histogram_edges(n_bins, lo=lo, hi=hi, spacing=spacing)
    # The continuous Gaussian's sigma is within a hair of the discrete one's: a cheap bound that keeps
    # the noise's support (and the accountant's arrays) small before anything is built.
    if analytic_gaussian_sigma(epsilon, delta, 1.0) > MAX_SIGMA:
        raise InvalidArgument(f"epsilon {epsilon} with delta {delta} needs noise of SD above {MAX_SIGMA:g} per cell; "
                              "this site makes histogram releases at larger epsilon only")
    sigma = discrete_gaussian_sigma(epsilon, delta, interval=interval)
    scalar_sigma = discrete_gaussian_sigma(epsilon, delta, sensitivity=SCALAR_RESOLUTION, interval=interval) if scalars else 0.0
    return HistogramPlan(edges, n_bins, spacing, tuple(sorted(scalars)), epsilon, delta, sigma, scalar_sigma)


def draw_histogram(plan: HistogramPlan, scores: np.ndarray, labels: np.ndarray, rng: np.random.Generator) -> bytes:
    """The noisy release as bytes: both classes' counts, then the scalars (integer sums plus noise).

    The noise comes from the exact sampler (:func:`dsroc.privacy.noise.sample_discrete_gaussian`); ``rng``
    only rounds the scalar terms (any rounding into [0, 1] keeps the sensitivity).
    """
    from dsroc.privacy.noise import sample_discrete_gaussian

    h0, h1 = dsroc.bin_scores(scores, labels, plan.edges)
    noise = sample_discrete_gaussian(plan.sigma, 2 * plan.n_bins)
    counts = np.concatenate([h0, h1]).astype(np.int64) + noise
    sums = []
    if plan.scalars:
        p = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
        y = np.asarray(labels, dtype=np.float64)
        terms = {"sum_sq": (y - p) ** 2, "sum_p": p, "sum_y": y}
        scalar_noise = sample_discrete_gaussian(plan.scalar_sigma, len(plan.scalars))
        for name, extra in zip(plan.scalars, scalar_noise):
            scaled = terms[name] * SCALAR_RESOLUTION
            rounded = np.floor(scaled) + (rng.random(scaled.size) < scaled - np.floor(scaled))
            sums.append(int(rounded.sum()) + int(extra))
    return np.asarray(list(counts) + sums, dtype=np.int64).tobytes()


def decode_histogram(plan: HistogramPlan, payload: bytes) -> tuple[np.ndarray, np.ndarray, dict]:
    """Noisy counts of negatives and positives, and the noisy scalars on their own scale."""
    values = np.frombuffer(payload, dtype=np.int64)
    m = plan.n_bins
    scalars = {name: float(v) / SCALAR_RESOLUTION for name, v in zip(plan.scalars, values[2 * m:])}
    return values[:m].copy(), values[m:2 * m].copy(), scalars


def noise_sd(sigma: float) -> float:
    """Standard deviation of ``N_Z(0, sigma^2)`` noise."""
    from dsroc.privacy.noise import discrete_gaussian_variance

    return math.sqrt(discrete_gaussian_variance(sigma)) if sigma > 0 else 0.0
