"""The paper protocol's steps at the analyst: a session whose methods release, upload, fit and ask the answers."""

from __future__ import annotations

import threading
from typing import Mapping, Sequence

import grpc
import numpy as np

import dsroc
from dsroc.v1 import site_pb2 as pb

from analyst.connection import SiteError, fan_out
from analyst.protocols.paper.wire import (UPLOAD_CHUNK, PaperAnswers, PlacementSummary, SiteRelease,
                                          calibration_parts, calibration_request, confusion_result, grid_spec,
                                          parts_at_theta, pooled_brier, read_release, survivor_chunks, with_budget,
                                          with_session)
from analyst.protocols.base import site_privacy_from_budget
from analyst.result.parts import ConfusionResult, SitePrivacy
from analyst.session import ValidationSession, check_privacy_request, concurrently

__all__ = ["PaperSession", "RemoteRocGlmParts"]

_UPLOADS_IN_FLIGHT = 16  # survivor upload streams sent at once, whatever the number of sites (each holds one message)


class RemoteRocGlmParts:
    """The ROC-GLM parts of all sites as one object: ``evaluate(theta)`` asks every site in parallel
    for its score vector, information and deviance at theta and returns their sum, so that
    :func:`dsroc.fit_rocglm` runs the same Fisher scoring as on pooled data."""

    def __init__(self, session: "PaperSession", grid=None):
        self._session, self._grid = session, grid_spec(grid)
        self.grid = dsroc.rocglm_grid(grid)  # known to the analyst: fit_rocglm's first (moment) step uses it
        self.evaluations = 0

    def evaluate(self, theta) -> dsroc.PartsAtTheta:
        """Sum over sites of the parts at ``theta``."""
        theta = [float(v) for v in np.asarray(theta, dtype=float).ravel()]
        self.evaluations += 1
        s = self._session
        given = s._rocglm_given.get((tuple(theta), self._grid.SerializeToString(deterministic=True)))

        def ask(conn):
            if given is not None:  # answered with the upload
                return parts_at_theta(given[conn.name])
            return parts_at_theta(conn.call("RocGlmParts", pb.RocGlmPartsRequest(
                session_id=s.session_ids[conn.name], theta=theta, grid=self._grid)))

        parts = s._each("ROC-GLM fit", ask, quiet=True)
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        s.progress("ROC-GLM fit", None, f"evaluation {self.evaluations}: theta = ({theta[0]:.5g}, {theta[1]:.5g}), "
                   f"deviance {total.deviance:.8g}")
        return total


class PaperSession(ValidationSession):
    """A :class:`analyst.session.ValidationSession` whose methods are the paper protocol's steps, one per round.

    Made by :meth:`analyst.Federation.session`; use it as a context manager so the sessions close.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # ROC-GLM parts the sites answered with the upload: (theta, grid) -> site -> RocGlmPartsResponse
        self._rocglm_given: dict[tuple, dict[str, pb.RocGlmPartsResponse]] = {}

    # -- the paper protocol's steps ----------------------------------------------------------------------------------
    def sensitivity(self) -> dict[str, pb.SensitivityResponse]:
        """Each site's l2-sensitivity and the rule behind it (the site decides, not the analyst)."""
        missing = [c for c in self.connections if c.name not in self._sensitivities]
        if missing:  # not answered with the session (not asked for, or the site gives its reason only here)
            replies = fan_out(missing, lambda c: c.call("Sensitivity", pb.SensitivityRequest(session_id=self._sid(c))),
                              executor=self.executor)
            self._sensitivities.update(zip([c.name for c in missing], replies))
        return {name: self._sensitivities[name] for name in self.sites}

    def release(self, *, epsilon: float, delta: float, sensitivity: float | None = None,
                timeout: float = 300.0) -> dict[str, SiteRelease]:
        """Noisy release of every site's negatives and positives (streamed; independent noise per class).

        Parameters
        ----------
        epsilon, delta : float
            The privacy level asked for; each site checks it against its policy and budget.
        sensitivity : float, optional
            Ask for a larger Delta than the sites' rules give (a smaller one is refused by the site).
        timeout : float
            Deadline of each streamed release.
        """
        check_privacy_request(epsilon=epsilon, delta=delta, sensitivity=sensitivity)

        def request(conn, cls, held):
            return pb.ReleaseRequest(session_id=self._sid(conn), score_class=cls, epsilon=float(epsilon),
                                     delta=float(delta), sensitivity=float(sensitivity or 0.0), reservation_id=held)

        def release_site(conn, held):
            # Both classes in one stream; a site from before that sends the negatives only, then is asked again.
            both = request(conn, pb.SCORE_CLASS_NEGATIVES, held)
            both.both_classes = True
            classes = read_release(conn, both, timeout=timeout)
            if set(classes) == {pb.SCORE_CLASS_NEGATIVES}:
                classes.update(read_release(conn, request(conn, pb.SCORE_CLASS_POSITIVES, held), timeout=timeout))
            if set(classes) != {pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES}:
                raise ValueError("the release stream did not send both classes")
            (neg, info0), (pos, info1) = classes[pb.SCORE_CLASS_NEGATIVES], classes[pb.SCORE_CLASS_POSITIVES]
            self.note_release(conn.name, info0.release_id, info1.release_id)
            self.progress("noisy release", conn.name, f"{neg.size} negatives, tau = {info0.tau:.4g}")
            self.progress("noisy release", conn.name, f"{pos.size} positives, tau = {info1.tau:.4g}")
            return SiteRelease(neg, pos, info0, info1)

        holds = self._held_with_session(request(self.connections[0], 0, ""))
        if holds is None:
            holds = self.hold("noisy release", lambda c: pb.PrepareRequest(scores=request(c, 0, "")))
        return dict(zip(self.sites, self.commit("noisy release", holds, release_site)))

    def _held_with_session(self, release: pb.ReleaseRequest) -> dict[str, str] | None:
        """The holds every site made with its session when they are of ``release`` (used once), else None (those
        made are cancelled: a site from before holds at OpenSession did not hold)."""
        held, asked, self._held, self._hold = self._held, self._hold, {}, None
        if asked is None:
            return None
        same = (asked.scores.epsilon, asked.scores.delta, asked.scores.sensitivity) == (
            release.epsilon, release.delta, release.sensitivity)
        if same and len(held) == len(self.connections):
            self.progress("noisy release", None, f"{len(held)} sites checked the request and hold its budget")
            # what commit records as charged: "" is a free replay
            self._asked = {name: (release.epsilon, release.delta, not held[name]) for name in held}
            return held
        self.cancel(held)
        return None

    @staticmethod
    def pool(releases: Mapping[str, SiteRelease]) -> tuple[np.ndarray, np.ndarray]:
        """Pool the noisy negatives into S~0 and the noisy positives into S~1 (sorted)."""
        # Each release arrives sorted: a stable sort (timsort) merges the sites' runs in O(n log K), in place.
        pooled = (np.concatenate([r.negatives for r in releases.values()]),
                  np.concatenate([r.positives for r in releases.values()]))
        for s in pooled:
            s.sort(kind="stable")
        return pooled

    def upload_survivors(self, releases: Mapping[str, SiteRelease], *,
                         answers: pb.PaperAggregatesRequest | None = None) -> PaperAnswers | None:
        """Send the pooled noisy negatives (S~0) and positives (S~1) to every site, both in one stream
        (``UploadSurvivors``; two streams to a site from before that call).

        Each site's released values go unchanged, site after site, with the sites' signed ReleaseInfo
        as the upload's segments: a site accepts a survivor function only as such a union.
        ``answers`` (:meth:`answers_request`): what every site answers on them in the same round trip;
        returned as :class:`PaperAnswers` (the ROC-GLM parts kept for :meth:`fit_rocglm`), or None when
        not asked or when a site predates that call (then ask :meth:`aggregates` and the rest apart). A
        site leaves the confusion matrix and the ROC-GLM parts out when it refuses them: the confusion
        matrix is then asked apart (its refusal raised), the parts in the fit.
        """
        parts, segments = {}, {}
        for cls, values, info in ((pb.SCORE_CLASS_NEGATIVES, "negatives", "info_negatives"),
                                  (pb.SCORE_CLASS_POSITIVES, "positives", "info_positives")):
            parts[cls] = [np.ascontiguousarray(getattr(r, values), dtype="<f8") for r in releases.values()]
            segments[cls] = [getattr(r, info) for r in releases.values()]
        for cls, arrays in parts.items():
            if (any(a.ndim != 1 for a in arrays) or not sum(a.size for a in arrays)
                    or not all(np.isfinite(a).all() for a in arrays)):
                raise ValueError("survivor scores must be a non-empty one-dimensional array of finite numbers")
        # The messages are serialized straight from the released arrays as they are sent (no message object,
        # no copy of the whole upload), and only a few streams are in flight at once, whatever the number of sites.
        totals = {cls: sum(a.size for a in arrays) for cls, arrays in parts.items()}
        in_flight = threading.BoundedSemaphore(_UPLOADS_IN_FLIGHT)

        def upload(conn):
            size = min(UPLOAD_CHUNK, self.policies[conn.name].max_chunk_scores or UPLOAD_CHUNK)

            def section(cls, asked=None):
                yield from survivor_chunks(parts[cls], size, first=pb.SurvivorChunk(header=pb.SurvivorHeader(
                    session_id=self._sid(conn), score_class=cls, n=totals[cls], segments=segments[cls],
                    answers=asked)).SerializeToString())

            def checked(r, cls):
                if r.n_received != totals[cls]:
                    raise ValueError(f"the site received {r.n_received} of {totals[cls]} survivor scores")
                return r.evaluations_left

            def both():
                yield from section(pb.SCORE_CLASS_NEGATIVES, with_budget(answers, None, self.release_ids.get(conn.name, [])))
                yield from section(pb.SCORE_CLASS_POSITIVES)

            try:
                with in_flight:
                    r = conn.call("UploadSurvivors", both, timeout=300.0, reply_type=pb.UploadSurvivorsResponse)
            except SiteError as exc:
                if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                r = None
            if r is not None:
                if [x.score_class for x in r.survivors] != [pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES]:
                    raise ValueError("the UploadSurvivors reply does not confirm both classes (S~0, then S~1)")
                left = checked(r.survivors[0], pb.SCORE_CLASS_NEGATIVES)
                checked(r.survivors[1], pb.SCORE_CLASS_POSITIVES)
                if answers is not None and not r.HasField("answers"):
                    raise ValueError("the UploadSurvivors reply carries no answers")
            else:  # a site from before UploadSurvivors: one stream per class, both at once

                def one_class(cls):
                    with in_flight:
                        reply = conn.call("UploadSurvivor", lambda: section(cls), timeout=300.0,
                                          reply_type=pb.UploadSurvivorResponse)
                    return checked(reply, cls)

                left, _ = concurrently(lambda: one_class(pb.SCORE_CLASS_NEGATIVES),
                                       lambda: one_class(pb.SCORE_CLASS_POSITIVES))
            self.progress("upload survivor functions", conn.name, f"{left} ROC-GLM evaluations left for this S~0")
            return None if r is None else r.answers

        replies = self._each("upload survivor functions", upload)
        if answers is None or any(r is None for r in replies):
            return None
        if answers.HasField("rocglm") and all(r.HasField("rocglm") for r in replies):  # else asked in the fit
            key = (tuple(answers.rocglm.theta), answers.rocglm.grid.SerializeToString(deterministic=True))
            self._rocglm_given[key] = {name: r.rocglm for name, r in zip(self.sites, replies)}
        return self._answers(replies, answers)

    def answers_request(self, *, n_bins: int = 10, edges=None, threshold: float | None = None,
                        theta=None, grid=None, delta: float | None = None) -> pb.PaperAggregatesRequest:
        """What :meth:`upload_survivors` asks with the upload: the placement moments, Brier sums, calibration
        cells (``n_bins`` or ``edges``) and budget (with ``delta``: this session's releases composed at it, each
        site's own filled in as it is asked), the confusion matrix at ``threshold`` (answered first) and the
        ROC-GLM parts at ``theta`` on ``grid`` (the fit's first evaluation, :func:`dsroc.fit_rocglm`'s start)."""
        request = pb.PaperAggregatesRequest(calibration=calibration_request(n_bins, edges))
        if delta:
            request.budget.delta = float(delta)
        if threshold is not None:
            if not np.isfinite(threshold):
                raise ValueError(f"threshold must be finite, got {threshold}")
            request.confusion.threshold = float(threshold)
        if theta is not None:
            request.rocglm.CopyFrom(pb.RocGlmPartsRequest(theta=[float(v) for v in theta], grid=grid_spec(grid)))
        return request

    def _answers(self, replies: Sequence[pb.PaperAggregatesResponse], request: pb.PaperAggregatesRequest) -> PaperAnswers:
        """Every site's answers (``PaperAggregatesResponse``, in site order) combined."""
        curve = dsroc.aggregate_calibration([calibration_parts(r.calibration) for r in replies], site_names=self.sites)
        confusion = None
        if request.HasField("confusion"):
            # A site that refused it left it out: asked apart, its refusal says why.
            confusion = (confusion_result(request.confusion.threshold, [r.confusion for r in replies])
                         if all(r.HasField("confusion") for r in replies) else self.confusion(request.confusion.threshold))
        return PaperAnswers(self._pooled_moments([r.moments for r in replies]), pooled_brier([r.brier for r in replies]),
                            curve, {name: r.budget for name, r in zip(self.sites, replies)}, confusion)

    def fit_rocglm(self, *, grid=None, start=None) -> dsroc.RocGlmResult:
        """Distributed Fisher scoring: :func:`dsroc.fit_rocglm` on the sum of the sites' parts."""
        parts = RemoteRocGlmParts(self, grid)
        self.progress("ROC-GLM fit", None, "distributed Fisher scoring")
        try:
            fit = dsroc.fit_rocglm(parts, start=start)
        except SiteError as exc:
            if exc.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "evaluations" in exc.message:
                # the cap counts new questions per survivor-function content (a repeated theta is free), and
                # a repeated (epsilon, delta) replays the same release, hence the same S~0
                hint = ("; a fit takes about 4-6 evaluations and the count is per survivor function: fits with "
                        "other grids or starting values on the same (epsilon, delta) ask new questions of the "
                        "same allowance; ask for another (epsilon, delta) (a new release) to get a fresh one")
                exc.message += hint
                exc.args = (exc.args[0] + hint,)
            raise
        self.progress("ROC-GLM fit", None, f"{fit.iterations} iterations, {parts.evaluations} evaluations per site, "
                      f"AUC {fit.auc:.4f}")
        return fit

    def placement_moments(self) -> "PlacementSummary":
        """Distributed means and DeLong variance of the sites' placement values.

        One round trip: each site's sums, counts and squared deviations from its own means, pooled
        by :func:`dsroc.pooled_sq_dev`; a second pass (squared deviations from the pooled means) only
        for sites that do not send their own (from before that field).
        """
        first = self._each("placement moments", lambda c: c.call(
            "PlacementMoments", pb.PlacementMomentsRequest(session_id=self._sid(c))))
        return self._pooled_moments(first)

    def _pooled_moments(self, first) -> "PlacementSummary":
        """The pooled means and DeLong variance from every site's pass-1 reply (and a pass 2 if needed)."""
        parts0 = [dsroc.MeanParts(r.pv0.total, r.pv0.n) for r in first]
        parts1 = [dsroc.MeanParts(r.pv1.total, r.pv1.n) for r in first]
        mean0, n1 = dsroc.pooled_mean(parts0)
        mean1, n0 = dsroc.pooled_mean(parts1)
        if all(r.HasField("local_ssd_pv0") and r.HasField("local_ssd_pv1") for r in first):
            ssd0 = dsroc.pooled_sq_dev(parts0, [r.local_ssd_pv0 for r in first])
            ssd1 = dsroc.pooled_sq_dev(parts1, [r.local_ssd_pv1 for r in first])
        else:
            means = pb.GlobalMeans(mean_pv0=mean0, mean_pv1=mean1)
            second = self._each("placement moments (pass 2)", lambda c: c.call(
                "PlacementMoments", pb.PlacementMomentsRequest(session_id=self._sid(c), global_means=means)))
            ssd0, ssd1 = sum(r.ssd_pv0 for r in second), sum(r.ssd_pv1 for r in second)
        var0 = dsroc.pooled_variance([ssd0], n1)
        var1 = dsroc.pooled_variance([ssd1], n0)
        variance = dsroc.delong_variance_from_moments(var_pv0=var0, n1=n1, var_pv1=var1, n0=n0)
        return PlacementSummary(mean0, mean1, variance, n0, n1)

    @staticmethod
    def release_summary(releases: Mapping[str, SiteRelease], *,
                        pooled: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[float, float]:
        """What the noise correction needs from the release alone: the blur deconvolved from the released
        scores (:func:`dsroc.deconvolution_correction`) and the noise variance of the corrected AUC
        (:func:`dsroc.noise_variance`), each site's tau.

        ``pooled``: :meth:`pool` of the releases, when at hand, spares sorting them again.
        """
        taus = {r.info_negatives.tau for r in releases.values()} | {r.info_positives.tau for r in releases.values()}
        if len(taus) == 1:  # one tau for every score: the sorted pools need no per-score tau (nor a sort)
            r0, r1 = pooled or PaperSession.pool(releases)
            t0 = t1 = taus.pop()
        else:
            r0 = np.concatenate([r.negatives for r in releases.values()])
            r1 = np.concatenate([r.positives for r in releases.values()])
            t0 = np.concatenate([np.full(r.negatives.size, r.info_negatives.tau) for r in releases.values()])
            t1 = np.concatenate([np.full(r.positives.size, r.info_positives.tau) for r in releases.values()])
        if not (np.any(t0) or np.any(t1)):
            return 0.0, 0.0
        return dsroc.deconvolution_correction(r0, r1, t0, t1), dsroc.noise_variance(r0, r1, t0, t1)

    @staticmethod
    def noise_corrected_auc(releases: Mapping[str, SiteRelease], moments: "PlacementSummary", *,
                            pooled: tuple[np.ndarray, np.ndarray] | None = None,
                            summary: tuple[float, float] | None = None,
                            level: float = 0.95, method: str = "logit") -> dsroc.NoiseCorrectedAUC:
        """The noise-corrected AUC and CI (:func:`dsroc.noise_corrected_auc`) from what the sites already
        released and answered: the placement means and :meth:`release_summary` (``summary``, when already
        computed)."""
        correction, noise = summary or PaperSession.release_summary(releases, pooled=pooled)
        return dsroc.noise_corrected_auc(mean_pv0=moments.mean_pv0, mean_pv1=moments.mean_pv1,
                                         correction=correction, delong_variance=moments.variance,
                                         noise_variance=noise, level=level, method=method)

    def brier(self) -> tuple[float, int]:
        """Brier score over all sites and the number of patients."""
        replies = self._each("Brier score", lambda c: c.call("BrierParts", pb.BrierPartsRequest(session_id=self._sid(c))))
        return pooled_brier(replies)

    def calibration(self, *, n_bins: int = 10, edges=None) -> dsroc.CalibrationCurve:
        """Calibration curve from the cells the sites released (cells below q stay at the site)."""
        request = calibration_request(n_bins, edges)
        replies = self._each("calibration", lambda c: c.call("CalibrationParts", with_session(request, self._sid(c))))
        return dsroc.aggregate_calibration([calibration_parts(r) for r in replies], site_names=self.sites)

    def aggregates(self, *, n_bins: int = 10, edges=None, delta: float | None = None
                   ) -> tuple["PlacementSummary", tuple[float, int], dsroc.CalibrationCurve, dict[str, pb.BudgetStatus]]:
        """:meth:`placement_moments`, :meth:`brier`, :meth:`calibration` and :meth:`budget` (at ``delta``) in one
        round trip to every site (``PaperAggregates``); separately from sites that predate that call."""
        request = calibration_request(n_bins, edges)

        def ask(conn):
            try:
                return conn.call("PaperAggregates", with_budget(pb.PaperAggregatesRequest(
                    session_id=self._sid(conn), calibration=request), delta, self.release_ids.get(conn.name, [])))
            except SiteError as exc:
                if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                return None

        replies = self._each("moments, Brier, calibration and budget", ask)
        if any(r is None for r in replies):
            return (self.placement_moments(), self.brier(), self.calibration(n_bins=n_bins, edges=edges),
                    self.budget(delta))
        got = self._answers(replies, pb.PaperAggregatesRequest())
        return got.moments, got.brier, got.calibration, got.budgets

    def confusion(self, threshold: float) -> ConfusionResult:
        """Confusion matrix at ``threshold`` summed over the sites (each cell at least q at every site)."""
        if not np.isfinite(threshold):
            raise ValueError(f"threshold must be finite, got {threshold}")
        replies = self._each("confusion matrix", lambda c: c.call(
            "ConfusionParts", pb.ConfusionPartsRequest(session_id=self._sid(c), threshold=float(threshold))))
        return confusion_result(threshold, replies)

    def privacy(self, releases: Mapping[str, SiteRelease], sensitivities: Mapping[str, pb.SensitivityResponse], *,
                budgets: Mapping[str, pb.BudgetStatus] | None = None) -> dict[str, SitePrivacy]:
        """Per site: Delta, tau, epsilon, delta, what this analysis charged and the budget left (``budgets``:
        :meth:`budget` asked after the release, or None to ask now)."""
        budgets = self.budget() if budgets is None else budgets
        out = {}
        for name in self.sites:
            r, s, b = releases[name], sensitivities[name], budgets[name]
            info = r.info_negatives
            out[name] = site_privacy_from_budget(
                b, epsilon=info.epsilon, delta=info.delta, noise_sd=info.tau, sensitivity=info.sensitivity,
                sensitivity_rule=info.rule or s.rule, formal_bound=s.formal_bound,
                n=float(r.info_negatives.n + r.info_positives.n),
                mu_charged=float(np.hypot(r.info_negatives.mu_charged, r.info_positives.mu_charged)),
                repeated=bool(r.info_negatives.repeated and r.info_positives.repeated), note=s.note)
        return out
