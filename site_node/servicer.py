"""The gRPC servicer: translates ``dsroc.v1`` messages and dispatches each call to its protocol.

Deliberately thin: authentication, audit records and the mapping of exceptions to status codes live
in :class:`site_node.auth.AuthAuditInterceptor`; sessions, datasets and budgets in
:class:`site_node.site.Site`; each protocol's calls in :mod:`site_node.protocols`; every decision in
those and the guard.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np

from dsroc import DisclosureError
from dsroc.v1 import site_pb2 as pb
from dsroc.v1 import site_pb2_grpc

from .audit import note, part
from .auth import current_analyst, request_parameters
from .budget_view import ReleaseQuery
from .errors import InvalidArgument, SiteError
from .histograms import PRIVACY_UNIT, SCALAR_RESOLUTION, SUMS_RESOLUTION
from .ledger import BudgetStatus
from .protocols import BoydProtocol, HistogramProtocol, PaperProtocol, SecAggProtocol
from .protocols.paper import NEGATIVES, POSITIVES
from .protocols.boyd import PRIVACY_UNIT as BOYD_PRIVACY_UNIT
from .protocols.secagg import Advertisement, Receipt
from .scores import ScoreSpec
from .site import Site

__all__ = ["SiteServicer", "API_VERSION"]

API_VERSION = "dsroc.v1"


def _budget_message(b: BudgetStatus) -> pb.BudgetStatus:
    return pb.BudgetStatus(
        dataset=b.dataset, budget_epsilon=b.budget_epsilon, budget_delta=b.budget_delta, mu_budget=b.mu_budget,
        mu_spent=b.mu_spent, mu_remaining=b.mu_remaining, epsilon_spent=b.epsilon_spent, releases=b.releases,
        delta_spent=b.delta_spent, epsilon_remaining=b.epsilon_remaining,
        accounting="gaussian-dp (exact)" if b.exact else "privacy loss distribution (pessimistic)",
        reservations=b.reservations,
        left=[pb.ReleasesLeft(query=_query_message(x.query), releases=x.releases, at_least=x.at_least,
                              refused=x.refused) for x in b.left],
    )


def _queries(messages) -> list[ReleaseQuery]:
    return [ReleaseQuery(q.protocol, q.epsilon, q.delta, tuple(q.scalars), q.count_share, q.score_sums)
            for q in messages]


def _query_message(q: ReleaseQuery) -> pb.ReleaseQuery:
    return pb.ReleaseQuery(protocol=q.protocol, epsilon=q.epsilon, delta=q.delta, scalars=list(q.scalars),
                           count_share=q.count_share, score_sums=q.score_sums)


class SiteServicer(site_pb2_grpc.SiteServiceServicer):
    """``dsroc.v1.SiteService`` backed by a :class:`Site` and one object per protocol."""

    def __init__(self, site: Site, *, calls_per_analyst: int = 0):
        self.site = site
        self.paper, self.histogram, self.boyd = PaperProtocol(site), HistogramProtocol(site), BoydProtocol(site)
        self.secagg = SecAggProtocol(site)
        self.calls_per_analyst = calls_per_analyst  # reported in the policy (0: no limit is known here)

    def _session(self, session_id: str):
        return self.site.session(current_analyst(), session_id)

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
        )

    def Describe(self, request, context):
        datasets = [
            pb.DatasetInfo(
                name=d.config.name, description=d.config.description,
                columns=[pb.Column(name=n, dtype=t) for n, t in d.columns],
                outcome_columns=d.config.outcomes, score_columns=d.config.scores,
                score_min=d.config.score_range[0], score_max=d.config.score_range[1],
                sensitivity_rule=d.rule, budget=_budget_message(d.budget),
            )
            for d in self.site.describe(current_analyst(), _queries(request.queries))
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
                prepared.CopyFrom(self._prepare(request.prepare, session))
            held = prepared.reservation_id
            return (lambda: self.site.cancel(analyst, held)) if held else None

        session = self.site.open_session(analyst, request.dataset, request.outcome, spec,
                                         before=hold if request.HasField("prepare") else None)
        reply = pb.OpenSessionResponse(session_id=session.session_id, policy=self._policy(),
                                       idle_timeout_seconds=self.site.sessions.idle_seconds, score_source=spec.key)
        if request.HasField("prepare"):
            reply.prepared.CopyFrom(prepared)
        if request.with_sensitivity:
            try:
                reply.sensitivity.CopyFrom(self._sensitivity(session))
            except (SiteError, ValueError):  # left unset: the session stands, and Sensitivity gives the reason
                pass
        return reply

    def CloseSession(self, request, context):
        self.site.close_session(current_analyst(), request.session_id)
        return pb.CloseSessionResponse()

    def _sensitivity(self, session) -> pb.SensitivityResponse:
        s = self.paper.sensitivity(session)
        return pb.SensitivityResponse(sensitivity=s.value, rule=s.rule, formal_bound=s.formal_bound, note=s.note)

    def Sensitivity(self, request, context):
        return self._sensitivity(self._session(request.session_id))

    def ReleaseNoisyScores(self, request, context):
        session = self._session(request.session_id)
        classes = (pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES) if request.both_classes else (request.score_class,)
        outs = [self.paper.release(session, score_class, epsilon=request.epsilon, delta=request.delta,
                                   sensitivity=request.sensitivity, reservation=request.reservation_id)
                for score_class in classes]
        note(privacy_cost=sum(out.mu_charged for out in outs),
             parameters={"release_id": outs[0].release.release_id, "tau": outs[0].tau})
        limit = self.site.policy.max_chunk_scores
        chunk = min(request.chunk_size, limit) if request.chunk_size else limit
        # Everything above ran (and was charged) before the first message; below only slices values.
        return (message for out, score_class in zip(outs, classes)
                for message in _chunks(_release_info(out, score_class), out.values, chunk))

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

    def _partition(self, request) -> dict:
        """The strata column and the second model's session of a HistogramRequest (the session the analyst's own)."""
        compare = self._session(request.compare_session_id) if request.compare_session_id else None
        return {"strata": request.strata_column, "compare": compare}

    # ------------------------------------------------------------------ secagg (site_node.protocols.secagg)
    def SecAggAdvertise(self, request, context):
        ad = self.secagg.advertise(self._session(request.session_id), round_id=request.round_id,
                                   epsilon=request.epsilon, delta=request.delta, n_bins=request.n_bins,
                                   spacing=request.spacing, sites=list(request.sites), colluders=request.colluders,
                                   interior=list(request.edges), score_sums=request.score_sums,
                                   proposed_sigma=request.share_sigma, next_round=_next_round(request),
                                   dropouts=request.dropouts)
        note(parameters={"kind": "secagg advertise", "round_id": ad.round_id.hex()})
        return pb.SecAggAdvertisement(site=ad.site, round_id=ad.round_id, request_sha256=ad.request_sha256,
                                      public_key=ad.public_key, signature=ad.signature, edges=list(ad.edges),
                                      share_sigma=ad.share_sigma, site_colluders=ad.site_colluders,
                                      sums_share_sigma=ad.sums_share_sigma)

    def SecAggMask(self, request, context):
        ads = [Advertisement(a.site, a.round_id, a.request_sha256, a.public_key, a.signature)
               for a in request.advertisements]
        out = self.secagg.mask(self._session(request.session_id), round_id=request.round_id, advertisements=ads,
                               follow_up=request.follow_up_reservation_id)
        note(parameters={"kind": "secagg mask", "round_id": bytes(request.round_id).hex()})
        r = out.receipt
        return pb.SecAggMaskResponse(masked=out.masked.astype("<u8").tobytes(), receipt=pb.SecAggReceipt(
            site=r.site, masked_sha256=r.masked_sha256, commitment=r.commitment, signature=r.signature),
            reservation_id=out.reservation_id, follow_up_reservation_id=out.follow_up_id)

    def SecAggConfirm(self, request, context):
        receipts = [Receipt(r.site, r.masked_sha256, r.commitment, r.signature) for r in request.receipts]
        signature = self.secagg.confirm(self._session(request.session_id), round_id=request.round_id,
                                        receipts=receipts)
        note(parameters={"kind": "secagg confirm", "round_id": bytes(request.round_id).hex(),
                         "survivors": sorted(r.site for r in receipts)})
        return pb.SecAggConfirmation(site=self.site.config.name, signature=signature)

    def SecAggUnmask(self, request, context):
        receipts = [Receipt(r.site, r.masked_sha256, r.commitment, r.signature) for r in request.receipts]
        confirmations = [(c.site, c.signature) for c in request.confirmations]
        out = self.secagg.unmask(self._session(request.session_id), round_id=request.round_id, receipts=receipts,
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

    def UploadSurvivor(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None or not first.HasField("header"):
            raise InvalidArgument("the first UploadSurvivor message must carry the header (session, class, n)")
        if first.header.HasField("answers"):
            raise InvalidArgument("header.answers: only UploadSurvivors (both classes in one stream) answers them")
        session, survivor, received, _ = self._read_survivor(first, request_iterator, then_header=False)
        self.paper.store_survivors(session, {first.header.score_class: survivor})
        return _upload_message(first.header.score_class, received, survivor, self.paper.evaluations_left(session))

    def UploadSurvivors(self, request_iterator, context):
        # Both classes in one stream, each checked (and audited) as its own UploadSurvivor, and every check of the
        # answers made, before anything is stored: a refusal leaves ledger, auditor and session as they were.
        message = next(request_iterator, None)
        if message is None or not message.HasField("header"):
            raise InvalidArgument("the first UploadSurvivors message must carry S~0's header (session, class, n)")
        session_id = message.header.session_id
        note(parameters={"session_id": session_id})
        answers = message.header.answers if message.header.HasField("answers") else None
        survivors, received = {}, {}
        for k, (score_class, name) in enumerate(((NEGATIVES, "S~0 (SCORE_CLASS_NEGATIVES)"),
                                                 (POSITIVES, "S~1 (SCORE_CLASS_POSITIVES)"))):
            if message is None:
                raise InvalidArgument(f"UploadSurvivors carries both classes: the header of {name} is missing")
            header = message.header
            if header.score_class != score_class or header.session_id != session_id or (k and header.HasField("answers")):
                raise InvalidArgument(f"header {k + 1} of UploadSurvivors: must be {name}'s, in the first header's "
                                      "session (S~0 first, then S~1), and only the first header may carry answers")
            with part("UploadSurvivor"):
                session, survivors[score_class], received[score_class], message = self._read_survivor(
                    message, request_iterator, then_header=k == 0)
        if answers is not None:
            self.paper.check_aggregates(session, answers.calibration)
        self.paper.store_survivors(session, survivors)
        left = self.paper.evaluations_left(session)
        out = pb.UploadSurvivorsResponse(survivors=[_upload_message(c, received[c], survivors[c], left)
                                                    for c in (NEGATIVES, POSITIVES)])
        if answers is not None:
            out.answers.CopyFrom(self._answers(session, answers))
        return out

    def _read_survivor(self, first, messages, *, then_header: bool):
        """Read and check (store nothing) the survivor function whose header is ``first``'s, its scores in ``first``
        and the messages after it: the session, the :class:`~site_node.sessions.Survivor`, the number of scores
        and, with ``then_header``, the message with the next header (None at the end of the stream)."""
        header = first.header
        note(parameters={"session_id": header.session_id, "score_class": header.score_class, "n": header.n})
        session = self._session(header.session_id)
        limit = self.site.policy.max_survivor_scores
        expected = header.n or sum(int(s.n) for s in header.segments)
        if expected > limit:
            raise InvalidArgument(f"header.n: this site accepts survivor functions of at most {limit} scores")
        # The signed releases are checked before one score is read: only then is room made for them, once.
        self.site.signer.verify_header(header.segments, expected, header.score_class)
        values, received, following = np.empty(expected), 0, None
        # chain, not a generator delegating to ``messages``: leaving this loop at the next header must not close them
        for message in itertools.chain((first,), messages):
            if message is not first and message.HasField("header"):
                if not then_header:
                    raise InvalidArgument("only the first UploadSurvivor message may carry a header")
                following = message
                break
            data = message.scores  # each read of the field is a copy of its bytes
            if len(data) % 8:
                raise InvalidArgument(f"scores must be little-endian float64 values: a multiple of 8 bytes, got {len(data)}")
            chunk = np.frombuffer(data, dtype="<f8")
            # Refused as soon as the stream outgrows its header, not after buffering it all.
            if received + chunk.size > expected:
                raise InvalidArgument(f"header.n is {expected} but more scores arrived")
            values[received:received + chunk.size] = chunk
            received += chunk.size
        survivor = self.paper.check_survivor(session, header.score_class, values[:received], declared_n=header.n,
                                             segments=header.segments)
        return session, survivor, received, following

    def RocGlmParts(self, request, context):
        return self._rocglm(self._session(request.session_id), request)

    def _rocglm(self, session, request) -> pb.RocGlmPartsResponse:
        parts, left, n_thresholds = self.paper.rocglm_parts(
            session, request.theta, request.grid if request.HasField("grid") else None)
        return pb.RocGlmPartsResponse(
            score=parts.score.tolist(), information=parts.information.ravel().tolist(), deviance=parts.deviance,
            evaluations_left=left, n_thresholds=n_thresholds,
        )

    def PlacementMoments(self, request, context):
        session = self._session(request.session_id)
        means = None
        if request.HasField("global_means"):
            means = (request.global_means.mean_pv0, request.global_means.mean_pv1)
        return _moments_message(self.paper.placement_moments(session, means))

    def BrierParts(self, request, context):
        return _brier_message(self.paper.brier_parts(self._session(request.session_id)))

    def CalibrationParts(self, request, context):
        return _calibration_message(self.paper.calibration_parts(self._session(request.session_id), request))

    def PaperAggregates(self, request, context):
        session = self._session(request.session_id)
        self.paper.check_aggregates(session, request.calibration)
        return self._answers(session, request)

    def _answers(self, session, request) -> pb.PaperAggregatesResponse:
        """The request's parts in its order (confusion, moments, Brier, calibration, budget, ROC-GLM), each answered
        and audited as its own call, after :meth:`PaperProtocol.check_aggregates`: of the parts that change state,
        the optional ones (confusion, ROC-GLM) are left unset when refused (their own call tells why), and the
        calibration cells withhold bins rather than refuse, so no refusal comes after a change."""
        out = pb.PaperAggregatesResponse()
        if request.HasField("confusion"):
            with _unset_if_refused("ConfusionParts", request_parameters(request.confusion)):
                out.confusion.CopyFrom(self._confusion(session, request.confusion.threshold))
        with part("PlacementMoments"):
            out.moments.CopyFrom(_moments_message(self.paper.placement_moments(session, None)))
        with part("BrierParts"):
            out.brier.CopyFrom(_brier_message(self.paper.brier_parts(session)))
        with part("CalibrationParts", request_parameters(request.calibration)):
            out.calibration.CopyFrom(_calibration_message(self.paper.calibration_parts(session, request.calibration)))
        with part("Budget", {"dataset": session.data.dataset}):
            out.budget.CopyFrom(_budget_message(self.site.budget(current_analyst(), session.data.dataset)))
        if request.HasField("rocglm"):
            with _unset_if_refused("RocGlmParts", request_parameters(request.rocglm)):
                out.rocglm.CopyFrom(self._rocglm(session, request.rocglm))
        return out

    def ConfusionParts(self, request, context):
        return self._confusion(self._session(request.session_id), request.threshold)

    def _confusion(self, session, threshold: float) -> pb.ConfusionPartsResponse:
        c = self.paper.confusion_parts(session, threshold)
        return pb.ConfusionPartsResponse(tp=c.tp, fp=c.fp, fn=c.fn, tn=c.tn)

    def Budget(self, request, context):
        return pb.BudgetResponse(budget=_budget_message(
            self.site.budget(current_analyst(), request.dataset, _queries(request.queries))))

    def PrepareRelease(self, request, context):
        return self._prepare(request)

    def _prepare(self, request, session=None) -> pb.PrepareResponse:
        """PrepareRelease (``session``: the session of a scores release, instead of its request's)."""
        which = request.WhichOneof("release")
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
        else:
            raise InvalidArgument("PrepareRequest must carry one release request (scores, histogram or boyd)")
        if request.hold_seconds < 0 or not np.isfinite(request.hold_seconds):
            raise InvalidArgument(f"hold_seconds must be a finite number >= 0, got {request.hold_seconds}")
        follow_up = None
        if request.HasField("follow_up"):
            if which != "histogram" or request.follow_up.session_id != request.histogram.session_id:
                raise InvalidArgument("follow_up: a follow-up release is a histogram release in the same session as "
                                      "the histogram release it follows")
            follow_up = self._histogram_plan(request.follow_up)
        held = self.site.prepare(plan, request.hold_seconds, follow_up=follow_up,
                                 takes_over=request.follow_up_reservation_id)
        note(parameters={"reservation_id": held.reservation_id, "kind": plan.key.kind, "repeated": held.repeated,
                         "follow_up_reservation_id": held.follow_up_id})
        budget = self.site.budget(current_analyst(), plan.dataset)
        return pb.PrepareResponse(reservation_id=held.reservation_id, expires_in_seconds=held.expires_in,
                                  repeated=held.repeated, budget=_budget_message(budget),
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


@contextlib.contextmanager
def _unset_if_refused(call: str, parameters: dict):
    """An optional part of a combined call: audited as its own call; refused, it is left out of the answer
    (the call goes on; the analyst asks that call apart to learn why)."""
    try:
        with part(call, parameters):
            yield
    except (SiteError, DisclosureError):
        pass


def _upload_message(score_class: int, received: int, survivor, left: int) -> pb.UploadSurvivorResponse:
    return pb.UploadSurvivorResponse(score_class=score_class, n_received=received, survivor_id=survivor.digest,
                                     evaluations_left=left)


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


def _moments_message(m) -> pb.PlacementMomentsResponse:
    if m.second_pass:
        return pb.PlacementMomentsResponse(ssd_pv0=m.ssd_pv0, ssd_pv1=m.ssd_pv1, second_pass=True)
    return pb.PlacementMomentsResponse(pv0=pb.MeanParts(total=m.pv0.total, n=m.pv0.n),
                                       pv1=pb.MeanParts(total=m.pv1.total, n=m.pv1.n),
                                       local_ssd_pv0=m.ssd_pv0, local_ssd_pv1=m.ssd_pv1)


def _brier_message(parts) -> pb.BrierPartsResponse:
    return pb.BrierPartsResponse(sum_sq=parts.sum_sq, n=parts.n)


def _calibration_message(parts) -> pb.CalibrationPartsResponse:
    bins = [pb.CalibrationBin(index=int(b), count=int(c), sum_scores=float(s), sum_labels=float(y))
            for b, c, s, y in zip(parts.bins, parts.count, parts.sum_score, parts.sum_label)]
    return pb.CalibrationPartsResponse(edges=parts.edges.tolist(), bins=bins, suppressed=[int(b) for b in parts.suppressed])


def _release_info(out, score_class: int) -> pb.ReleaseInfo:
    """The ReleaseInfo of one class's noisy scores (:class:`site_node.protocols.paper.ScoreRelease`)."""
    release, charged = out.release, out.mu_charged
    return pb.ReleaseInfo(
        score_class=score_class, n=out.values.size, sensitivity=out.sensitivity, tau=out.tau,
        epsilon=release.epsilon, delta=release.delta, mu=release.mu, mu_charged=charged,
        repeated=charged == 0.0, rule=release.rule,
        **{k: v for k, v in out.signed.items() if k not in ("score_class", "n", "epsilon", "delta", "sensitivity")},
    )


def _chunks(info, values: np.ndarray, size: int):
    """The release stream: the info on the first message, then consecutive slices of ``values`` as
    little-endian float64 bytes."""
    values = np.ascontiguousarray(values, dtype="<f8")
    for offset in range(0, values.size, size):
        chunk = pb.ReleaseChunk(scores=values[offset:offset + size].tobytes(), offset=offset)
        if offset == 0:
            chunk.info.CopyFrom(info)
        yield chunk
