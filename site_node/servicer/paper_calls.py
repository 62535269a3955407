"""The paper protocol's calls of the gRPC servicer: its ``dsroc.v1`` messages translated and dispatched to
:class:`site_node.protocols.paper.PaperProtocol` (a mixin of :class:`site_node.servicer.SiteServicer`)."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np

from dsroc import DisclosureError
from dsroc.v1 import site_pb2 as pb

from ..errors import InvalidArgument, SiteError
from ..interceptors.audit import note, part, unsent_parts
from ..interceptors.auth import current_analyst, request_parameters
from ..protocols.paper.protocol import NEGATIVES, POSITIVES
from .budget_messages import budget_message

__all__ = ["PaperCalls"]


class PaperCalls:
    """The paper protocol's calls; the servicer provides ``site``, ``paper`` (its protocol) and ``_session``."""

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
        # answers made, before anything is stored: a refusal leaves ledger, auditor, session and log as they were
        # (but for its refusal).
        with unsent_parts():
            return self._upload_survivors(request_iterator)

    def _upload_survivors(self, request_iterator) -> pb.UploadSurvivorsResponse:
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
                                             segments=header.segments, header_checked=True)
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
        with unsent_parts():
            session = self._session(request.session_id)
            self.paper.check_aggregates(session, request.calibration)
            return self._answers(session, request)

    def _answers(self, session, request) -> pb.PaperAggregatesResponse:
        """The request's parts, each answered and audited as its own call, after
        :meth:`PaperProtocol.check_aggregates`: first those that change nothing and may refuse the call (moments,
        Brier, budget), then those that record what they answer (confusion and ROC-GLM, optional, left unset when
        refused: their own call tells why; calibration, which withholds bins rather than refuse, after the
        confusion matrix, which the auditor would otherwise refuse), so no refusal comes after a change."""
        out = pb.PaperAggregatesResponse()
        with part("PlacementMoments"):
            out.moments.CopyFrom(_moments_message(self.paper.placement_moments(session, None)))
        with part("BrierParts"):
            out.brier.CopyFrom(_brier_message(self.paper.brier_parts(session)))
        with part("Budget", {"dataset": session.data.dataset}):
            out.budget.CopyFrom(budget_message(self.site.budget(
                current_analyst(), session.data.dataset, delta=request.budget.delta,
                release_ids=tuple(request.budget.release_ids))))
        if request.HasField("confusion"):  # before the calibration cells, which withhold bins for it
            with _unset_if_refused("ConfusionParts", request_parameters(request.confusion)):
                out.confusion.CopyFrom(self._confusion(session, request.confusion.threshold))
        with part("CalibrationParts", request_parameters(request.calibration)):
            out.calibration.CopyFrom(_calibration_message(self.paper.calibration_parts(session, request.calibration)))
        if request.HasField("rocglm"):
            with _unset_if_refused("RocGlmParts", request_parameters(request.rocglm)):
                out.rocglm.CopyFrom(self._rocglm(session, request.rocglm))
        return out

    def ConfusionParts(self, request, context):
        return self._confusion(self._session(request.session_id), request.threshold)

    def _confusion(self, session, threshold: float) -> pb.ConfusionPartsResponse:
        c = self.paper.confusion_parts(session, threshold)
        return pb.ConfusionPartsResponse(tp=c.tp, fp=c.fp, fn=c.fn, tn=c.tn)


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
