"""Boyd, Lantz and Page's smooth-sensitivity AUC and average precision as a site release (H-B1), charged to the ledger.

The release protects rows under *bounded* DP (one patient's row replaced; the site's patient count n
is disclosed), unlike the score releases (scores of a fixed cohort) and the histograms (add or
remove a patient). The ledger composes the numbers of every release with one accountant; the
privacy unit of each release is stated in its answer and in docs/privacy.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from dsroc.privacy.accounting import ApproximateDp, Laplace
import dsroc  # dsroc.mechanisms is looked up at first use: it imports scipy.special

from ..errors import InvalidArgument
from ..rules.guard import check_release_parameters, require_privacy_level
from ..sessions import Session
from ..store.ledger import Release, ReleaseKey, ReleasePlan
from .base import SiteProtocol

__all__ = ["DEFAULT_COUNT_SHARE", "PRIVACY_UNIT", "BoydRelease", "BoydProtocol", "boyd_events", "check_count_share"]

DEFAULT_COUNT_SHARE = 0.1
PRIVACY_UNIT = ("rows, bounded DP: one patient's row (score and label) replaced; the site's patient count n is "
                "disclosed, its class counts are not")


@dataclass(frozen=True)
class BoydRelease:
    """The released numbers and the ledger record behind them (never the noise scales: they reveal n1)."""

    release: Release
    charged: bool
    auc: float
    average_precision: float
    n1_noisy: float
    n: int
    count_share: float


def boyd_events(epsilon: float, delta: float, count_share: float) -> tuple:
    """The ledger events of one release: AUC and AP each (eps_a, delta / 2)-DP, the count Laplace(1 / eps_c).

    Raises InvalidArgument when ``count_share * epsilon`` is below 1e-300 (the count's Laplace scale, their
    inverse, would be beyond the floating-point range).
    """
    if not count_share * epsilon >= 1e-300:  # found by the fuzzer: 1e-300 * 1e-300 underflowed to a division by zero
        raise InvalidArgument(f"epsilon * count_share must be at least 1e-300 (the count's Laplace scale is their "
                              f"inverse), got {epsilon:g} * {count_share:g}")
    eps_stat = (1.0 - count_share) * epsilon / 2.0
    return (ApproximateDp(eps_stat, delta / 2.0), ApproximateDp(eps_stat, delta / 2.0),
            Laplace(1.0 / (count_share * epsilon), 1.0))


def check_count_share(count_share: float) -> float:
    """The count share of a request: 0 means DEFAULT_COUNT_SHARE; otherwise strictly between 0 and 1."""
    share = float(count_share) if count_share else DEFAULT_COUNT_SHARE
    if not (math.isfinite(share) and 0.0 < share < 1.0):
        raise InvalidArgument(f"count_share must lie strictly between 0 and 1 (0 for the default 0.1), got {count_share}")
    return share


class BoydProtocol(SiteProtocol):
    """Boyd's release (H-B1): the smooth-sensitivity AUC, average precision and a noisy positive count."""

    name = "boyd"

    def release(self, session: Session, *, epsilon: float, delta: float, count_share: float = 0.0,
                reservation: str = "") -> BoydRelease:
        """Release the session's Boyd AUC, AP and noisy positive count once, charging the site's ledger first
        (using the hold ``reservation`` when given)."""
        plan, share = self.plan(session, epsilon=epsilon, delta=delta, count_share=count_share)
        release, charged = self.site.charge(plan, reservation)
        auc, ap, n1_noisy = np.frombuffer(release.payload, dtype=np.float64).tolist()
        return BoydRelease(release, charged, auc, ap, n1_noisy, int(release.n0 + release.n1), share)

    def plan(self, session: Session, *, epsilon: float, delta: float,
             count_share: float = 0.0) -> tuple[ReleasePlan, float]:
        """Check a Boyd release and plan it (what PrepareRelease holds and the release charges); returns the
        plan and the count share.

        Checks (all before anything is charged): "boyd" among the protocols served, the per-release caps of
        the policy, 0 < count_share < 1, and the privacy level q on both classes (as for every release).
        """
        # Boyd's release is bounded DP with the site's n disclosed, which the histogram protocol keeps private:
        # only a site that lists "boyd" in its protocols answers it.
        self.require()
        epsilon, delta = check_release_parameters(self.policy, epsilon, delta)
        share = check_count_share(count_share)
        events = boyd_events(epsilon, delta, share)
        data = session.data
        negatives, positives = data.negatives, data.positives
        require_privacy_level(negatives.size, self.policy.privacy_level, "each class of a release (negatives)")
        require_privacy_level(positives.size, self.policy.privacy_level, "each class of a release (positives)")
        eps_stat, delta_stat = events[0].epsilon, events[0].delta
        request = json.dumps({"epsilon": epsilon, "delta": delta, "count_share": share}, sort_keys=True)
        key = ReleaseKey(*data.key, "boyd", request)
        scores = np.concatenate([negatives, positives])
        labels = np.concatenate([np.zeros(negatives.size, np.int8), np.ones(positives.size, np.int8)])

        def make(seed: bytes) -> tuple[bytes, int, int]:
            rng = np.random.default_rng(int.from_bytes(seed, "big"))
            boyd = dsroc.mechanisms.boyd
            auc = boyd.dp_auc(scores, labels, epsilon=eps_stat, delta=delta_stat, rng=rng)
            ap = boyd.dp_average_precision(scores, labels, epsilon=eps_stat, delta=delta_stat, rng=rng)
            n1_noisy, _ = boyd.dp_class_count(positives.size, scores.size, epsilon=share * epsilon, rng=rng)
            # Only the noisy values: the noise scales depend on the private class counts (smooth sensitivity).
            payload = np.array([auc.value, ap.value, float(n1_noisy)], dtype=np.float64)
            return payload.tobytes(), negatives.size, positives.size

        return ReleasePlan(key, data.dataset, session.analyst, events, epsilon, delta, "boyd", data.fingerprint, make,
                           True), share
