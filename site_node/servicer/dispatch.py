"""The gRPC servicer: translates ``dsroc.v1`` messages and dispatches each call to its protocol.

Deliberately thin: authentication, audit records and the mapping of exceptions to status codes live
in :class:`site_node.interceptors.auth.AuthAuditInterceptor`; sessions, datasets and budgets in
:class:`site_node.site.Site`; each protocol's calls in :mod:`site_node.protocols` (the paper protocol's
messages in :mod:`site_node.servicer.paper_calls`); every decision in those and the guard.
"""

from __future__ import annotations

import numpy as np

from dsroc.v1 import site_pb2 as pb
from dsroc.v1 import site_pb2_grpc

from ..data.scores import ScoreSpec
from ..errors import InvalidArgument, SiteError
from ..interceptors.audit import note, part
from ..interceptors.auth import current_analyst, request_parameters
from ..protocols import BoydProtocol, HistogramProtocol, PaperProtocol, SecAggProtocol, SurvivalProtocol
from ..protocols.boyd import PRIVACY_UNIT as BOYD_PRIVACY_UNIT
from ..protocols.costly import costly
from ..protocols.histogram.release import LAPLACE, PRIVACY_UNIT, SCALAR_RESOLUTION, SUMS_RESOLUTION
from ..protocols.histogram.secagg import Advertisement, Receipt
from ..protocols.histogram.survival import KIND as SURVIVAL
from ..rules.guard import check_held_together
from ..site import Site
from .budget_messages import budget_message, planned_releases
from .paper_calls import PaperCalls

__all__ = ["SiteServicer", "API_VERSION"]

API_VERSION = "dsroc.v1"


class SiteServicer(PaperCalls, site_pb2_grpc.SiteServiceServicer):
    """``dsroc.v1.SiteService`` backed by a :class:`Site` and one object per protocol (the paper protocol's calls
    in :class:`site_node.servicer.paper_calls.PaperCalls`)."""

    def __init__(self, site: Site, *, calls_per_analyst: int = 0):
        self.site = site
        self.paper, self.histogram, self.boyd = PaperProtocol(site), HistogramProtocol(site), BoydProtocol(site)
        self.secagg, self.survival = SecAggProtocol(site), SurvivalProtocol(site)
        self.calls_per_analyst = calls_per_analyst  # reported in the policy (0: no limit is known here)

    def _session(self, session_id: str, *, survival: bool = False):
        """The analyst's session of the kind the call serves (a survival session for ``survival``, else binary)."""
        return self.site.session(current_analyst(), session_id, survival=survival)

    def _policy(self) -> pb.Policy:
        policy = self.site.policy
        return pb.Policy(
            privacy_level=policy.privacy_level, max_epsilon=policy.max_epsilon, max_delta=policy.max_delta,
            budget_epsilon=policy.budget_epsilon, budget_delta=policy.budget_delta,
            sensitivity_rule=policy.sensitivity, max_glm_evaluations=policy.max_glm_evaluations,
            max_thresholds=policy.max_thresholds, session_idle_seconds=self.site.config.session_idle_seconds,
            max_chunk_scores=policy.max_chunk_scores, max_survivor_scores=policy.max_survivor_scores,
            max_survivor_uploads=policy.max_survivor_uploads, max_models=policy.max_models,
            threshold_steps=policy.threshold_steps, protocols=policy.protocols,
            histogram_bins=policy.histogram_bins, histogram_spacings=policy.histogram_spacings,
            histogram_logit_min=policy.histogram_logit_range[0], histogram_logit_max=policy.histogram_logit_range[1],
            privacy_unit=PRIVACY_UNIT, max_calls_in_progress=self.calls_per_analyst,
            secagg_colluders=policy.secagg_colluders, secagg_min_sites=policy.secagg_min_sites,
            strata=[pb.StrataColumn(column=c, cuts=list(cuts)) for c, cuts in policy.strata],
            histogram_max_cells=policy.histogram_max_cells,
            survival_time_edges=policy.survival_time_edges, survival_max_time_bins=policy.survival_max_time_bins,
            survival_max_tau=policy.survival_max_tau,
            survival_min_censoring_survival=policy.survival_min_censoring_survival,
        )

    def Describe(self, request, context):
        with costly(current_analyst()):  # each planned release's query is a calibration
            return self._describe(request)

    def _describe(self, request) -> pb.DescribeResponse:
        datasets = [
            pb.DatasetInfo(
                name=d.config.name, description=d.config.description,
                columns=[pb.Column(name=n, dtype=t) for n, t in d.columns],
                outcome_columns=d.config.outcomes, score_columns=d.config.scores,
                score_min=d.config.score_range[0], score_max=d.config.score_range[1],
                sensitivity_rule=d.rule, budget=budget_message(d.budget), time_columns=d.config.time_columns,
            )
            for d in self.site.describe(current_analyst(), planned_releases(request.queries))
        ]
        return pb.DescribeResponse(site_name=self.site.config.name, api_version=API_VERSION, datasets=datasets,
                                   policy=self._policy())

    def OpenSession(self, request, context):
        spec = ScoreSpec.from_proto(request.score)
        analyst, prepared = current_analyst(), pb.PrepareResponse()

        def hold(session):
            # PrepareRelease on the session-to-be: a refused hold opens no session (and records no model).
            with part("PrepareRelease", request_parameters(request.prepare)):
                if request.prepare.WhichOneof("release") != "scores":
                    raise InvalidArgument("prepare: OpenSession holds a paper-protocol release (scores) only; "
                                          "ask PrepareRelease for the others")
                self.site.require_kind(session, survival=False)
                prepared.CopyFrom(self._prepare(request.prepare, session))
            held = prepared.reservation_id
            return (lambda: self.site.cancel(analyst, held)) if held else None

        session = self.site.open_session(analyst, request.dataset, request.outcome, spec, time=request.time,
                                         before=hold if request.HasField("prepare") else None)
        reply = pb.OpenSessionResponse(session_id=session.session_id, policy=self._policy(),
                                       idle_timeout_seconds=self.site.sessions.idle_seconds, score_source=spec.key)
        if request.HasField("prepare"):
            reply.prepared.CopyFrom(prepared)
        if request.with_sensitivity and not session.data.survival:  # Sensitivity refuses a survival session
            try:
                reply.sensitivity.CopyFrom(self._sensitivity(session))
            except (SiteError, ValueError):  # left unset: the session stands, and Sensitivity gives the reason
                pass
        return reply

    def CloseSession(self, request, context):
        self.site.close_session(current_analyst(), request.session_id)
        return pb.CloseSessionResponse()

    def ReleaseHistogram(self, request, context):
        session = self._session(request.session_id)
        out = self.histogram.release(session, epsilon=request.epsilon, delta=request.delta, n_bins=request.n_bins,
                                     spacing=request.spacing, scalars=list(request.scalars),
                                     score_sums=request.score_sums, reservation=request.reservation_id,
                                     interior=list(request.edges), **self._partition(request))
        release, plan = out.release, out.plan
        # The audit's privacy_cost is a Gaussian mu; this release's cost is its (epsilon, delta), in parameters.
        note(parameters={"release_id": release.release_id, "kind": "histogram", "sigma": plan.sigma,
                         "mechanism": plan.mechanism, "epsilon_charged": plan.epsilon if out.charged else 0.0})
        count_sd, sums_sd, scalar_sd = plan.noise_sds
        sums = {}
        if out.sums is not None:
            sums = dict(negative_sums=out.sums[0].tolist(), positive_sums=out.sums[1].tolist(),
                        sums_noise_sd=sums_sd, sums_resolution=1.0 / SUMS_RESOLUTION)
        return pb.HistogramResponse(
            edges=plan.edges.tolist(), negatives=out.negatives.tolist(), positives=out.positives.tolist(),
            sigma=plan.sigma, noise_sd=count_sd, epsilon=plan.epsilon, delta=plan.delta, mechanism=plan.mechanism,
            privacy_unit=PRIVACY_UNIT, repeated=not out.charged, release_id=release.release_id,
            epsilon_spent=out.budget.epsilon_spent,
            scalars=[pb.NoisyScalar(name=name, value=value, noise_sd=scalar_sd, resolution=1.0 / SCALAR_RESOLUTION)
                     for name, value in out.scalars.items()], **sums, **_partition_fields(plan),
        )

    def ReleaseSurvival(self, request, context):
        out = self.survival.release(self._session(request.session_id, survival=True), epsilon=request.epsilon,
                                    delta=request.delta, time_edges=list(request.time_edges), n_bins=request.n_bins,
                                    spacing=request.spacing, edges=list(request.edges), risk_sums=request.risk_sums,
                                    reservation=request.reservation_id)
        release, plan, values = out.release, out.plan, out.values
        note(parameters={"release_id": release.release_id, "kind": SURVIVAL, "sigma": plan.sigma,
                         "mechanism": LAPLACE, "epsilon_charged": plan.epsilon if out.charged else 0.0})
        count_sd, sums_sd = plan.noise_sds
        sums = {}
        if plan.risk_sums:
            sums = dict(offsets=values.offsets.ravel().tolist(), squares=values.squares.ravel().tolist(),
                        sums_sigma=plan.sums_sigma, sums_noise_sd=sums_sd, sums_resolution=SUMS_RESOLUTION)
        return pb.SurvivalResponse(
            time_edges=plan.time_edges.tolist(), edges=plan.score_edges.tolist(), counts=values.counts.ravel().tolist(),
            sigma=plan.sigma, noise_sd=count_sd, epsilon=plan.epsilon, delta=plan.delta, privacy_unit=PRIVACY_UNIT,
            mechanism=LAPLACE, repeated=not out.charged, release_id=release.release_id,
            epsilon_spent=out.budget.epsilon_spent, **sums,
        )

    def _partition(self, request) -> dict:
        """The strata column and the second model's session of a HistogramRequest (the session the analyst's own)."""
        compare = self._session(request.compare_session_id) if request.compare_session_id else None
        return {"strata": request.strata_column, "compare": compare}

    # ------------------------------------------------------------------ secagg (site_node.protocols.histogram.secagg)
    def SecAggAdvertise(self, request, context):
        session = self._session(request.session_id, survival=request.survival)
        with costly(session.analyst):  # a share calibration: a search of privacy-loss evaluations
            ad = self._advertise(session, request)
        note(parameters={"kind": "secagg advertise", "round_id": ad.round_id.hex()})
        return pb.SecAggAdvertisement(site=ad.site, round_id=ad.round_id, request_sha256=ad.request_sha256,
                                      public_key=ad.public_key, signature=ad.signature, edges=list(ad.edges),
                                      share_sigma=ad.share_sigma, site_colluders=ad.site_colluders,
                                      sums_share_sigma=ad.sums_share_sigma, time_edges=list(ad.time_edges))

    def _advertise(self, session, request) -> Advertisement:
        return self.secagg.advertise(session, round_id=request.round_id,
                                     epsilon=request.epsilon, delta=request.delta, n_bins=request.n_bins,
                                     spacing=request.spacing, sites=list(request.sites), colluders=request.colluders,
                                     interior=list(request.edges), score_sums=request.score_sums,
                                     proposed_sigma=request.share_sigma, next_round=_next_round(request),
                                     dropouts=request.dropouts, survival=request.survival,
                                     time_edges=list(request.time_edges))

    def _round_session(self, request):
        """The session of a secagg round's later step: a survival session for a survival round, else binary."""
        return self._session(request.session_id,
                             survival=self.secagg.survival_round(current_analyst(), request.round_id))

    def SecAggMask(self, request, context):
        ads = [Advertisement(a.site, a.round_id, a.request_sha256, a.public_key, a.signature)
               for a in request.advertisements]
        out = self.secagg.mask(self._round_session(request), round_id=request.round_id, advertisements=ads,
                               follow_up=request.follow_up_reservation_id)
        note(parameters={"kind": "secagg mask", "round_id": bytes(request.round_id).hex()})
        r = out.receipt
        return pb.SecAggMaskResponse(masked=out.masked.astype("<u8").tobytes(), receipt=pb.SecAggReceipt(
            site=r.site, masked_sha256=r.masked_sha256, commitment=r.commitment, signature=r.signature),
            reservation_id=out.reservation_id, follow_up_reservation_id=out.follow_up_id)

    def SecAggConfirm(self, request, context):
        receipts = [Receipt(r.site, r.masked_sha256, r.commitment, r.signature) for r in request.receipts]
        signature = self.secagg.confirm(self._round_session(request), round_id=request.round_id,
                                        receipts=receipts)
        note(parameters={"kind": "secagg confirm", "round_id": bytes(request.round_id).hex(),
                         "survivors": sorted(r.site for r in receipts)})
        return pb.SecAggConfirmation(site=self.site.config.name, signature=signature)

    def SecAggUnmask(self, request, context):
        receipts = [Receipt(r.site, r.masked_sha256, r.commitment, r.signature) for r in request.receipts]
        confirmations = [(c.site, c.signature) for c in request.confirmations]
        out = self.secagg.unmask(self._round_session(request), round_id=request.round_id, receipts=receipts,
                                 confirmations=confirmations)
        note(parameters={"kind": "secagg unmask", "round_id": bytes(request.round_id).hex(),
                         "release_id": out.release_id, "charged": out.charged})
        return pb.SecAggUnmaskResponse(self_seed=out.self_seed, release_id=out.release_id, repeated=not out.charged,
                                       epsilon_spent=out.epsilon_spent, honest_shares=out.honest,
                                       privacy_unit=PRIVACY_UNIT, pair_seeds=[
                                           pb.SecAggPairSeed(peer=peer, seed=seed) for peer, seed in out.pair_seeds])

    def ReleaseBoydStatistics(self, request, context):
        out = self.boyd.release(self._session(request.session_id), epsilon=request.epsilon, delta=request.delta,
                                count_share=request.count_share, reservation=request.reservation_id)
        # The audit's privacy_cost is a Gaussian mu; this release's cost is its (epsilon, delta), in parameters.
        note(parameters={"release_id": out.release.release_id, "kind": "boyd",
                         "epsilon_charged": out.release.epsilon if out.charged else 0.0})
        return pb.BoydResponse(
            auc=out.auc, average_precision=out.average_precision, n1_noisy=out.n1_noisy, n=out.n,
            epsilon=out.release.epsilon, delta=out.release.delta,
            count_share=out.count_share, privacy_unit=BOYD_PRIVACY_UNIT, release_id=out.release.release_id,
            repeated=not out.charged,
        )

    def Budget(self, request, context):
        with costly(current_analyst()):  # each planned release's query is a calibration and a search of compositions
            return pb.BudgetResponse(budget=budget_message(
                self.site.budget(current_analyst(), request.dataset, planned_releases(request.queries),
                                 delta=request.delta, release_ids=tuple(request.release_ids))))

    def PrepareRelease(self, request, context):
        with costly(current_analyst()):  # a plan's calibration and the budget check with every hold composed
            return self._prepare(request)

    def _prepare(self, request, session=None) -> pb.PrepareResponse:
        """PrepareRelease (``session``: the session of a scores release, instead of its request's)."""
        which = request.WhichOneof("release")
        if which == "histogram" and request.HasField("follow_up"):  # one request: capped as a whole, first
            check_held_together(self.site.policy, [(r.epsilon, r.delta) for r in (request.histogram, request.follow_up)])
        if which == "scores":
            r = request.scores
            plan = self.paper.plan(session or self._session(r.session_id), epsilon=r.epsilon, delta=r.delta,
                                   sensitivity=r.sensitivity)[0]
        elif which == "histogram":
            plan = self._histogram_plan(request.histogram)
        elif which == "boyd":
            r = request.boyd
            plan = self.boyd.plan(self._session(r.session_id), epsilon=r.epsilon, delta=r.delta,
                                  count_share=r.count_share)[0]
        elif which == "survival":
            r = request.survival
            plan = self.survival.plan(self._session(r.session_id, survival=True), epsilon=r.epsilon, delta=r.delta,
                                      time_edges=list(r.time_edges), n_bins=r.n_bins, spacing=r.spacing,
                                      edges=list(r.edges), risk_sums=r.risk_sums)[0]
        else:
            raise InvalidArgument("PrepareRequest must carry one release request (scores, histogram, boyd or survival)")
        if request.hold_seconds < 0 or not np.isfinite(request.hold_seconds):
            raise InvalidArgument(f"hold_seconds must be a finite number >= 0, got {request.hold_seconds}")
        follow_up = None
        if request.HasField("follow_up"):
            if which != "histogram" or request.follow_up.session_id != request.histogram.session_id:
                raise InvalidArgument("follow_up: a follow-up release is a histogram release in the same session as "
                                      "the histogram release it follows")
            follow_up = self._histogram_plan(request.follow_up)
        held = self.site.prepare(plan, request.hold_seconds, follow_up=follow_up,
                                 takes_over=request.follow_up_reservation_id,
                                 session_id=session.session_id if session else getattr(request, which).session_id)
        note(parameters={"reservation_id": held.reservation_id, "kind": plan.key.kind, "repeated": held.repeated,
                         "follow_up_reservation_id": held.follow_up_id})
        budget = self.site.budget(current_analyst(), plan.dataset)
        return pb.PrepareResponse(reservation_id=held.reservation_id, expires_in_seconds=held.expires_in,
                                  repeated=held.repeated, budget=budget_message(budget),
                                  follow_up_reservation_id=held.follow_up_id)

    def _histogram_plan(self, r):
        """The checked release plan of a HistogramRequest (what PrepareRelease holds)."""
        return self.histogram.plan(self._session(r.session_id), epsilon=r.epsilon, delta=r.delta, n_bins=r.n_bins,
                                   spacing=r.spacing, scalars=list(r.scalars), score_sums=r.score_sums,
                                   interior=list(r.edges), **self._partition(r))[0]

    def CancelReservation(self, request, context):
        cancelled = self.site.cancel(current_analyst(), request.reservation_id)
        note(parameters={"reservation_id": request.reservation_id, "cancelled": cancelled})
        return pb.CancelReservationResponse(cancelled=cancelled)


def _next_round(request) -> tuple | None:
    """A SecAggAdvertiseRequest's next round as (epsilon, delta, score_sums, share_sigma), or None."""
    if not request.HasField("next_round"):
        return None
    n = request.next_round
    return n.epsilon, n.delta, n.score_sums, n.share_sigma


def _partition_fields(plan) -> dict:
    """The HistogramResponse fields of a partitioned release (none for a plain one)."""
    p = plan.partition
    if p is None:
        return {}
    return {"parts": p.parts, "strata_cuts": list(p.cuts), "compare_edges": list(p.edges)}

