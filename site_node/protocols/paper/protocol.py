"""The paper protocol at the site: noisy score releases, survivor uploads and the exact aggregates on them.

Every call checks the guard's rules first and changes state (ledger, query counters, session) only
after all checks passed, so a refused request leaves everything as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace

import numpy as np

import dsroc  # RocGlmParts, SurvivorFunction: looked up at first use (their modules import scipy)
from dsroc import (
    BrierParts,
    CalibrationParts,
    ConfusionParts,
    MeanParts,
    brier_parts,
    calibration_parts,
    confusion_parts,
    mean_parts,
    sq_dev_parts,
)
from dsroc.privacy.accounting import Gaussian
from dsroc.privacy.lattice import lattice_gaussian

from ...errors import FailedPrecondition, InvalidArgument, PermissionDenied
from ...rules.approvals import model_hash
from ...rules.disclosure import calibration_queries, confusion_queries
from ...rules.guard import (
    SiteSensitivity,
    analyst_input,
    check_edges,
    check_grid,
    check_release_parameters,
    check_theta,
    check_threshold,
    release_sensitivity,
    require_privacy_level,
    site_sensitivity,
)
from ...security.signing import values_digest
from ...sessions import Session, Survivor
from ...store.ledger import Release, ReleaseKey, ReleasePlan
from ..base import SiteProtocol
from .sealed import open_points, seal_points

__all__ = ["NEGATIVES", "POSITIVES", "ScoreRelease", "PlacementMoments", "PaperProtocol"]

NEGATIVES, POSITIVES = 1, 2  # dsroc.v1.ScoreClass values
_CLASS_NAMES = {NEGATIVES: "negatives", POSITIVES: "positives"}


@dataclass(frozen=True)
class ScoreRelease:
    """One class's noisy scores (ascending) of a release, with its noise and what this request charged."""

    release: Release
    tau: float
    sensitivity: float
    mu_charged: float
    values: np.ndarray
    signed: dict  # the ReleaseInfo fields the site's signature covers, with ``site`` and ``signature``


@dataclass(frozen=True)
class PlacementMoments:
    """Pass 1 (sums, counts and squared deviations from the site's own means) or pass 2 (squared
    deviations from given means) of the placement values."""

    pv0: MeanParts | None = None
    pv1: MeanParts | None = None
    ssd_pv0: float = 0.0
    ssd_pv1: float = 0.0
    second_pass: bool = False


def _check_class(score_class: int) -> int:
    if score_class not in _CLASS_NAMES:
        raise InvalidArgument("score_class must be SCORE_CLASS_NEGATIVES or SCORE_CLASS_POSITIVES")
    return score_class


class PaperProtocol(SiteProtocol):
    """The paper protocol's calls: sensitivity, noisy scores, survivor functions, ROC-GLM parts, placement
    moments, Brier, calibration and confusion parts."""

    name = "paper"

    def _approved(self, session: Session) -> Session:
        """Refuse a paper-protocol answer about an analyst's model the site has not approved.

        Every paper-protocol call goes through here (sensitivity, noisy release, survivor upload and
        the exact aggregates); the histogram protocol's releases are DP whatever the model and do not.
        """
        self.require()
        spec = session.data.spec
        if spec.model is not None and not self.site.approvals.is_approved(spec):
            raise PermissionDenied(
                "model approval: this site answers the paper protocol about an analyst's model only after its "
                f"administrator approved the model (dsroc-site model approve FILE); model sha256 {model_hash(spec)} "
                "is not approved here"
            )
        return session

    # ------------------------------------------------------------------ sensitivity and release
    def sensitivity(self, session: Session) -> SiteSensitivity:
        """The site's sensitivity for the session's scores (computed once per dataset, source, outcome)."""
        data = self._approved(session).data
        with data.lock:
            if data.sensitivity is None:
                rule = self.site.sensitivity_rule(self.site.datasets.config(data.dataset))
                data.sensitivity = site_sensitivity(rule, policy=self.policy, score_range=data.score_range,
                                                    model=data.spec.model, features=data.features)
            return data.sensitivity

    def release(self, session: Session, score_class: int, *, epsilon: float, delta: float,
                sensitivity: float = 0.0, reservation: str = "") -> ScoreRelease:
        """Noisy scores of one class; the first request of a release charges the ledger for both classes
        (using the hold ``reservation`` when given)."""
        self.require()
        score_class = _check_class(score_class)
        plan, tau, used_delta = self.plan(session, epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        release, charged = self.site.charge(plan, reservation)
        data = session.data
        # Opened once for both classes and the repeats (the two classes are asked at the same moment).
        opened = self.site.releases.get(release.release_id, lambda: self._open(release, used_delta))
        (values, digest), (other, other_digest) = (opened[0:2], opened[2:4])[::1 if score_class == NEGATIVES else -1]
        common = {"population": data.key[0], "dataset": data.dataset, "source": data.spec.key, "outcome": data.outcome,
                  "release_id": release.release_id, "epsilon": release.epsilon, "delta": release.delta,
                  "sensitivity": used_delta}
        signed = {**common, "score_class": score_class, "n": values.size, "values_sha256": digest}
        signer = self.site.signer
        # Each class signed alone (for sites from before pair signatures) and both classes at once: a site verifies
        # one signature per peer for an upload of both classes.
        pair = signer.sign_pair({**common, "n_negatives": opened[0].size, "negatives_sha256": opened[1],
                                 "n_positives": opened[2].size, "positives_sha256": opened[3]})
        signed.update(site=signer.name, signature=signer.sign(signed), other_n=other.size,
                      other_values_sha256=other_digest, pair_signature=pair)
        return ScoreRelease(release, tau, used_delta, release.mu if charged else 0.0, values, signed)

    def _open(self, release: Release, used_delta: float) -> tuple[np.ndarray, str, np.ndarray, str]:
        """Both classes' released values of a charged release and their digests."""
        try:
            points = open_points(self.site.noise_key, release.key, release.payload)
        except ValueError as error:
            raise FailedPrecondition(f"this release cannot be replayed ({error}); fresh noise would allow averaging, "
                                     "so a new release needs different parameters") from None
        noise = lattice_gaussian(release.epsilon, release.delta, used_delta)
        values = [noise.values(p) for p in points]
        for v in values:
            v.flags.writeable = False
        return values[0], values_digest(values[0]), values[1], values_digest(values[1])

    def plan(self, session: Session, *, epsilon: float, delta: float,
             sensitivity: float = 0.0) -> tuple[ReleasePlan, float, float]:
        """Check a noisy-score release (both classes) and plan it (what PrepareRelease holds and the release
        charges): the plan, its noise SD tau and its sensitivity."""
        self.require()
        epsilon, delta = check_release_parameters(self.policy, epsilon, delta)
        site_delta = self.sensitivity(session)
        used_delta = release_sensitivity(site_delta, sensitivity, score_range=session.data.score_range)
        data = session.data
        negatives, positives = data.negatives, data.positives
        # The release covers both classes, so each must meet the privacy level.
        require_privacy_level(negatives.size, self.policy.privacy_level, "each class of a release (negatives)")
        require_privacy_level(positives.size, self.policy.privacy_level, "each class of a release (positives)")
        with analyst_input("epsilon, delta, sensitivity"):
            # Scores on a public lattice plus exact discrete Gaussian noise, charged as the continuous Gaussian
            # mechanism whose Gaussian-DP mu it provably does not exceed (dsroc.privacy.lattice).
            noise = lattice_gaussian(epsilon, delta, used_delta)
        tau = noise.sigma
        request = json.dumps({"epsilon": epsilon, "delta": delta, "sensitivity": used_delta}, sort_keys=True)
        key = ReleaseKey(*data.key, "scores", request)

        def make(_seed: bytes) -> tuple[bytes, int, int]:
            # The sampler runs on the CSPRNG and no seed reproduces it: the ledger keeps the sorted noisy points
            # sealed with the noise key (outside the ledger file), and a replay opens them.
            points = [noise.sorted_noisy_points(v) for v in (negatives, positives)]
            return seal_points(self.site.noise_key, key, *points), negatives.size, positives.size

        plan = ReleasePlan(key, data.dataset, session.analyst, (Gaussian(tau, noise.accounted_sensitivity),), epsilon,
                           delta, site_delta.rule, data.fingerprint, make, True)
        return plan, tau, used_delta

    # ------------------------------------------------------------------ survivor functions
    def upload_survivor(self, session: Session, score_class: int, values: np.ndarray, *, declared_n: int,
                        segments=()) -> Survivor:
        """Store the analyst's pooled noisy scores of one class as the session's survivor function.

        Accepted only as the union of the signed releases ``segments`` (``dsroc.v1.ReleaseInfo``) of this
        site and its peers, so that every cut point is a noisy score (:mod:`site_node.security.signing`).
        """
        survivor = self.check_survivor(session, score_class, values, declared_n=declared_n, segments=segments)
        self.store_survivors(session, {score_class: survivor})
        return survivor

    def check_survivor(self, session: Session, score_class: int, values: np.ndarray, *, declared_n: int,
                       segments=(), header_checked: bool = False) -> Survivor:
        """Every check of :meth:`upload_survivor` (nothing stored): the survivor function and its content key.
        ``header_checked``: the segments' signatures were verified already (``ReleaseSigner.verify_header``)."""
        self.require()
        score_class = _check_class(score_class)
        self._approved(session)
        if values.size == 0:
            raise InvalidArgument("the survivor upload contains no scores")
        if declared_n and declared_n != values.size:
            raise InvalidArgument(f"header.n is {declared_n} but {values.size} scores arrived")
        if not np.isfinite(values).all():
            raise InvalidArgument("the survivor upload contains non-finite values (NaN or inf)")
        self.site.signer.verify_segments(segments, values, score_class, self._known_release,
                                         header_checked=header_checked)
        function = dsroc.SurvivorFunction(values)  # released values: counted on their lattice, not sorted
        # The content key of the query caps, over the sorted values (whatever the order of the segments).
        digest = hashlib.sha256()
        for block in function.sorted_blocks():
            digest.update(memoryview(block))
        return Survivor(function, digest.hexdigest())

    def store_survivors(self, session: Session, survivors: dict[int, Survivor]) -> None:
        """Record checked survivor functions (:meth:`check_survivor`; one ledger transaction, the cap on distinct
        ones per class checked there: all or none) and make them the session's."""
        self.ledger.record_survivors([(*session.data.key, cls, s.digest) for cls, s in survivors.items()],
                                     self.policy.max_survivor_uploads)
        with session.lock:
            session.survivors.update(survivors)

    def _known_release(self, release_id: str) -> bool:
        return self.ledger.has_release(release_id)

    def evaluations_left(self, session: Session) -> int:
        """Theta-evaluations left on the session's uploaded S~0."""
        survivor = session.survivors.get(NEGATIVES)
        if survivor is None:
            return 0
        return self.ledger.evaluations_left(self._eval_key(session, survivor), self.policy.max_glm_evaluations)

    @staticmethod
    def _eval_key(session: Session, survivor: Survivor) -> tuple[str, str, str, str]:
        # Keyed by content, not by session: re-uploading the same S~0 or opening a new session does
        # not reset the count.
        return (*session.data.key, survivor.digest)

    def _placements(self, session: Session, score_class: int) -> tuple[Survivor, np.ndarray]:
        """The uploaded survivor function of a class and, under it, PV0 of the true positives (class
        NEGATIVES: S~0) or PV1 of the true negatives (class POSITIVES: S~1)."""
        self._approved(session)
        with session.lock:
            survivor = session.survivors.get(score_class)
            if survivor is None:
                which = "S~0 (pooled noisy negatives)" if score_class == NEGATIVES else "S~1 (pooled noisy positives)"
                raise FailedPrecondition(f"upload the survivor function {which} with UploadSurvivor first")
            if survivor.placements is None:
                data = session.data
                query = data.sorted_positives if score_class == NEGATIVES else data.sorted_negatives
                # Every later use (grid counts, sums) is order-free and cheap on sorted values: the
                # survivor function is non-increasing, so sorted queries give them reversed.
                survivor.placements = survivor.function(query)[::-1]
            return survivor, survivor.placements

    # ------------------------------------------------------------------ aggregates
    def rocglm_parts(self, session: Session, theta, grid_message) -> tuple[dsroc.PartsAtTheta, int, int]:
        """The site's ROC-GLM score, information and deviance at theta; counts one evaluation."""
        self.require()
        theta = check_theta(theta)
        grid = check_grid(self.policy, grid_message)
        require_privacy_level(session.data.n_positives, self.policy.privacy_level, "the ROC-GLM parts (positives)")
        survivor, pv0 = self._placements(session, NEGATIVES)
        query = hashlib.sha256(grid.tobytes() + theta.tobytes()).hexdigest()
        left = self.ledger.use_evaluation(self._eval_key(session, survivor), self.policy.max_glm_evaluations,
                                          query=query)
        with session.lock:
            # The counts depend on the grid only: build them once, evaluate at each theta in O(grid size).
            model = survivor.models.get(grid.tobytes())
            if model is None:
                model = survivor.models[grid.tobytes()] = dsroc.RocGlmParts.from_placements(pv0, grid)
        parts = model.evaluate(theta)
        return parts, left, grid.size

    def placement_moments(self, session: Session, means: tuple[float, float] | None) -> PlacementMoments:
        """Pass 1 (``means`` None): sums and counts of PV0 and PV1; pass 2: squared deviations from ``means``."""
        self.require()
        q = self.policy.privacy_level
        if means is not None:
            for name, value in zip(("global_means.mean_pv0", "global_means.mean_pv1"), means):
                if not 0.0 <= value <= 1.0:  # also refuses NaN; placement values lie in [0, 1]
                    raise InvalidArgument(f"{name} must lie in [0, 1] (a mean of placement values), got {value}")
        require_privacy_level(session.data.n_positives, q, "the placement moments (positives)")
        require_privacy_level(session.data.n_negatives, q, "the placement moments (negatives)")
        (_, pv0), (_, pv1) = self._placements(session, NEGATIVES), self._placements(session, POSITIVES)
        if means is None:
            # With the site's own means the analyst pools the variance without a second pass; it learns
            # nothing a second pass would not tell (any mean it sends gives the sum of squares).
            parts0, parts1 = mean_parts(pv0), mean_parts(pv1)
            return PlacementMoments(pv0=parts0, pv1=parts1, ssd_pv0=sq_dev_parts(pv0, parts0.total / parts0.n),
                                    ssd_pv1=sq_dev_parts(pv1, parts1.total / parts1.n))
        return PlacementMoments(ssd_pv0=sq_dev_parts(pv0, means[0]), ssd_pv1=sq_dev_parts(pv1, means[1]),
                                second_pass=True)

    def check_aggregates(self, session: Session, calibration) -> None:
        """The checks of :meth:`placement_moments` (pass 1), :meth:`brier_parts` and :meth:`calibration_parts` that
        need no survivor function (nothing changes): a combined call runs them before any part changes state."""
        self.require()
        data, q = session.data, self.policy.privacy_level
        require_privacy_level(data.n_positives, q, "the placement moments (positives)")
        require_privacy_level(data.n_negatives, q, "the placement moments (negatives)")
        self._probabilities(session, "the Brier score")
        require_privacy_level(data.scores.size, q, "the Brier parts")
        check_edges(self.policy, calibration)

    def _probabilities(self, session: Session, what: str) -> None:
        self._approved(session)
        lo, hi = session.data.score_range
        if lo < 0.0 or hi > 1.0:
            raise InvalidArgument(f"{what} needs probabilities in [0, 1]; this score column's declared range is [{lo}, {hi}]")

    def brier_parts(self, session: Session) -> BrierParts:
        """Sum of squared errors and n."""
        self.require()
        self._probabilities(session, "the Brier score")
        data = session.data
        require_privacy_level(data.scores.size, self.policy.privacy_level, "the Brier parts")
        return brier_parts(data.scores, data.labels)

    def calibration_parts(self, session: Session, request) -> CalibrationParts:
        """Per-bin sums of the bins the disclosure auditor lets through; the others are withheld (index only).

        ``dsroc.calibration_parts`` withholds bins below q (and more, so that their total is 0 or at
        least q); then, while the released counts and positives would let the answers so far determine
        a group of 1 to q-1 patients, the smallest released bin is withheld as well.
        """
        edges = check_edges(self.policy, request)
        self._probabilities(session, "calibration")
        data = session.data
        parts = calibration_parts(data.scores, data.labels, edges, privacy_level=self.policy.privacy_level)
        keep = np.ones(parts.bins.size, dtype=bool)
        while True:
            try:
                self.site.check_disclosure(data, calibration_queries(data.outcome, data.spec.key, edges, parts.bins[keep]),
                            "these calibration bins")
                break
            except PermissionDenied:
                if not keep.any():
                    raise
                keep[np.flatnonzero(keep)[np.argmin(parts.count[keep])]] = False
        return replace(parts, bins=parts.bins[keep], count=parts.count[keep], sum_score=parts.sum_score[keep],
                       sum_label=parts.sum_label[keep],
                       suppressed=np.sort(np.concatenate([parts.suppressed, parts.bins[~keep]])))

    def confusion_parts(self, session: Session, threshold: float) -> ConfusionParts:
        """Confusion-matrix cells at ``threshold``; refused when a cell is below the privacy level or the
        disclosure auditor finds that the answers so far would determine a group below it."""
        self._approved(session)
        threshold = check_threshold(threshold, score_range=session.data.score_range, steps=self.policy.threshold_steps)
        data = session.data
        cells = confusion_parts(data.scores, data.labels, threshold, privacy_level=self.policy.privacy_level)
        self.site.check_disclosure(data, confusion_queries(data.outcome, data.spec.key, threshold), f"the threshold {threshold:g}")
        return cells
