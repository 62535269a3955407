"""The distributed procedure (SPEC section 2), one method per step, over one session per site."""

from __future__ import annotations

import numbers
import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import grpc
import numpy as np

import dsroc
from dsroc.v1 import site_pb2 as pb

from analyst.connection import SiteConnection, SiteError, fan_out, fan_out_partial
from analyst.result.parts import ConfusionResult, SitePrivacy

__all__ = ["concurrently", "PaperAnswers", "PlacementSummary", "Progress", "RemoteRocGlmParts", "SiteRelease", "ValidationSession", "check_privacy_request", "grid_spec",
           "score_source"]

#: ``progress(step, site, message)``: ``site`` is None for a message about the whole step.
Progress = Callable[[str, "str | None", str], None]

_UPLOAD_CHUNK = 65536  # scores per streamed message (512 KiB), lowered to the site's policy cap
_SCORES_TAG = bytes([pb.SurvivorChunk.DESCRIPTOR.fields_by_name["scores"].number << 3 | 2])  # length-delimited
_UPLOADS_IN_FLIGHT = 16  # survivor upload streams sent at once, whatever the number of sites (each holds one message)


def _quiet(step: str, site: str | None, message: str) -> None:
    return None


def _varint(n: int) -> bytes:
    """``n`` as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _survivor_chunks(arrays: Sequence[np.ndarray], size: int, first: bytes = b"") -> Iterator[bytes]:
    """The scores of ``arrays`` (little-endian float64, one after another) as serialized ``SurvivorChunk``
    messages (field ``scores``) of at most ``size`` scores each: made from the arrays as they are sent (one
    copy each, as serializing a message makes), so no site's upload is held whole.
    Small arrays share a message (a site's part of a 50-site upload is a few hundred scores: one message
    per site was most of a site's work per upload). ``first`` (a serialized message, the header) starts the
    first message, which protobuf parses as one message with both fields: one message fewer per upload; the
    first message then carries fewer scores by the header's size, so that it is no larger than the others."""
    parts: list = []
    room = size - (len(first) + 7) // 8
    if room <= 0:  # a header as large as a whole message: on its own
        yield first
        first, room = b"", size
    for a in arrays:
        start = 0
        while start < a.size:
            part = a[start:start + room]
            parts.append(part)
            start += part.size
            room -= part.size
            if room == 0:
                yield _scores_message(parts, first)
                parts, room, first = [], size, b""
    if parts or first:
        yield _scores_message(parts, first)


def _scores_message(parts: Sequence[np.ndarray], first: bytes = b"") -> bytes:
    if not parts:
        return first
    return b"".join((first, _SCORES_TAG, _varint(sum(p.nbytes for p in parts)), *parts))


def concurrently(*steps: Callable[[], object]) -> list:
    """Run independent steps at the same time (the first in this thread, the others in new threads) and
    return their results in order; the first failure (in order) is raised after all have finished."""
    results: list = [None] * len(steps)
    errors: list = [None] * len(steps)

    def run(i):
        try:
            results[i] = steps[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(1, len(steps))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results


def score_source(*, score: str | None = None, model=None) -> pb.ScoreSource:
    """The wire form of a score source: a score column name, or a GLM (``dsroc.GlmModel`` or mapping).

    Exactly one of ``score`` and ``model`` must be given.
    """
    if (score is None) == (model is None):
        raise ValueError("give exactly one of 'score' (a score column) and 'model' (GLM coefficients)")
    if score is not None:
        if not isinstance(score, str) or not score:
            raise ValueError(f"'score' must be a non-empty column name, got {score!r}")
        return pb.ScoreSource(score_column=score)
    if isinstance(model, Mapping):
        unknown = set(model) - {"link", "intercept", "coefficients"}
        if unknown:
            raise ValueError(f"'model' has unknown key(s) {sorted(unknown)}; expected link, intercept, coefficients")
        model = dsroc.GlmModel(link=model.get("link", "logit"), intercept=model.get("intercept", 0.0),
                               coefficients=dict(model.get("coefficients", {})))
    if not isinstance(model, dsroc.GlmModel):
        raise ValueError(f"'model' must be a dsroc.GlmModel or a mapping, got {type(model).__name__}")
    link = {"logit": pb.LINK_LOGIT, "probit": pb.LINK_PROBIT}[model.link]
    return pb.ScoreSource(model=pb.GlmModel(
        link=link, intercept=float(model.intercept),
        coefficients=[pb.Coefficient(name=k, value=float(v)) for k, v in model.coefficients.items()]))


def check_privacy_request(*, epsilon: float, delta: float, sensitivity: float | None = None) -> None:
    """Reject a malformed (epsilon, delta, sensitivity) before any site is asked (the sites check it too)."""
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if delta >= 1:
        raise ValueError(f"delta must be below 1, got {delta}")
    if sensitivity is not None and (isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real)
                                    or not (np.isfinite(sensitivity) and sensitivity > 0)):
        raise ValueError(f"sensitivity must be a positive finite number, got {sensitivity!r}")


def grid_spec(grid) -> pb.GridSpec:
    """The wire form of an ROC-GLM grid (None, an int or explicit thresholds), validated locally first."""
    dsroc.rocglm_grid(grid)  # same rule as the sites: fail here with a clear message
    if grid is None:
        return pb.GridSpec()
    if np.ndim(grid) == 0:
        return pb.GridSpec(n_points=int(grid))
    return pb.GridSpec(thresholds=pb.Values(values=[float(t) for t in np.asarray(grid, dtype=float)]))


@dataclass(frozen=True)
class PlacementSummary:
    """Pooled means of the placement values (PV0 of the positives, PV1 of the negatives), DeLong variance, n0, n1."""

    mean_pv0: float
    mean_pv1: float
    variance: float
    n0: int
    n1: int


@dataclass(frozen=True)
class PaperAnswers:
    """What every site answered on the uploaded survivor functions in the upload's round trip
    (:meth:`ValidationSession.upload_survivors` with ``answers``)."""

    moments: PlacementSummary
    brier: tuple[float, int]
    calibration: dsroc.CalibrationCurve
    budgets: dict[str, pb.BudgetStatus]
    confusion: ConfusionResult | None


@dataclass(frozen=True)
class SiteRelease:
    """One site's noisy scores of both classes and the release parameters it reported."""

    negatives: np.ndarray
    positives: np.ndarray
    info_negatives: pb.ReleaseInfo
    info_positives: pb.ReleaseInfo


class RemoteRocGlmParts:
    """The ROC-GLM parts of all sites as one object: ``evaluate(theta)`` asks every site in parallel
    for its score vector, information and deviance at theta and returns their sum, so that
    :func:`dsroc.fit_rocglm` runs the same Fisher scoring as on pooled data."""

    def __init__(self, session: "ValidationSession", grid=None):
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
                return _parts_at_theta(given[conn.name])
            return _parts_at_theta(conn.call("RocGlmParts", pb.RocGlmPartsRequest(
                session_id=s.session_ids[conn.name], theta=theta, grid=self._grid)))

        parts = s._each("ROC-GLM fit", ask, quiet=True)
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        s.progress("ROC-GLM fit", None, f"evaluation {self.evaluations}: theta = ({theta[0]:.5g}, {theta[1]:.5g}), "
                   f"deviance {total.deviance:.8g}")
        return total


def _parts_at_theta(r: pb.RocGlmPartsResponse) -> dsroc.PartsAtTheta:
    if len(r.score) != 2 or len(r.information) != 4:
        raise ValueError("malformed RocGlmParts reply (need 2 score and 4 information values)")
    return dsroc.PartsAtTheta(np.array(r.score), np.array(r.information).reshape(2, 2), float(r.deviance))


def _pooled_brier(replies) -> tuple[float, int]:
    parts = [dsroc.BrierParts(r.sum_sq, r.n) for r in replies]
    return dsroc.aggregate_brier(parts), sum(p.n for p in parts)


def _confusion_result(threshold: float, replies) -> ConfusionResult:
    s = dsroc.aggregate_confusion(dsroc.ConfusionParts(r.tp, r.fp, r.fn, r.tn) for r in replies)
    return ConfusionResult(float(threshold), s.tp, s.fp, s.fn, s.tn, s.sensitivity, s.specificity, s.ppv, s.npv)


def _calibration_request(n_bins: int, edges) -> pb.CalibrationPartsRequest:
    return pb.CalibrationPartsRequest(edges=pb.Values(values=dsroc.calibration_edges(n_bins, edges=edges).tolist()))


def _with_session(request: pb.CalibrationPartsRequest, session_id: str) -> pb.CalibrationPartsRequest:
    out = pb.CalibrationPartsRequest()
    out.CopyFrom(request)
    out.session_id = session_id
    return out


def _calibration_parts(r: pb.CalibrationPartsResponse) -> dsroc.CalibrationParts:
    return dsroc.CalibrationParts(
        edges=np.asarray(r.edges, dtype=np.float64), bins=np.array([b.index for b in r.bins], dtype=np.int64),
        count=np.array([b.count for b in r.bins], dtype=np.int64),
        sum_score=np.array([b.sum_scores for b in r.bins], dtype=np.float64),
        sum_label=np.array([b.sum_labels for b in r.bins], dtype=np.float64),
        suppressed=np.asarray(r.suppressed, dtype=np.int64))


def _explain(failed: Sequence[SiteError], what: str):
    """Raise the first site's error with ``what`` (what happened at the others) added to its message."""
    first = failed[0]
    also = f" (also failed: {', '.join(e.site for e in failed[1:])})" if len(failed) > 1 else ""
    first.message += also + what
    first.args = (f"site '{first.site}': {first.code.name}: {first.message}",)
    raise first


class ValidationSession:
    """One open session per site on (dataset, outcome, score source); each step is a method.

    Made by :meth:`analyst.Federation.session`; use it as a context manager so the sessions close.
    """

    def __init__(self, connections: Sequence[SiteConnection], *, dataset: str, outcome: str,
                 source: pb.ScoreSource, progress: Progress | None = None, executor: Executor | None = None,
                 with_sensitivity: bool = False, hold: pb.PrepareRequest | None = None):
        self.connections = list(connections)
        self.executor = executor
        self.dataset, self.outcome = dataset, outcome
        self.progress = progress or _quiet
        self.session_ids: dict[str, str] = {}
        self.policies: dict[str, pb.Policy] = {}
        self._sensitivities: dict[str, pb.SensitivityResponse] = {}
        # ROC-GLM parts the sites answered with the upload: (theta, grid) -> site -> RocGlmPartsResponse
        self._rocglm_given: dict[tuple, dict[str, pb.RocGlmPartsResponse]] = {}

        # The release the sessions hold with their opening (``hold``): site -> reservation id ("" for a free replay).
        self._held: dict[str, str] = {}
        self._hold = hold

        def open_one(conn):
            # One round trip: the reply carries the policy (and, when asked, the sensitivity and the hold) too.
            r = conn.call("OpenSession", pb.OpenSessionRequest(dataset=dataset, outcome=outcome, score=source,
                                                               with_sensitivity=with_sensitivity, prepare=hold))
            self.session_ids[conn.name] = r.session_id
            if r.HasField("prepared"):
                self._held[conn.name] = r.prepared.reservation_id
            self.policies[conn.name] = (r.policy if r.HasField("policy")  # a site from before: ask separately
                                        else conn.call("Describe", pb.DescribeRequest()).policy)
            # Steps run at the same time; never more calls at once than the site serves one analyst.
            conn.limit_calls(self.policies[conn.name].max_calls_in_progress)
            if r.HasField("sensitivity"):
                self._sensitivities[conn.name] = r.sensitivity
            return r.score_source

        try:
            described = self._each("open session", open_one)
        except Exception as exc:
            self.close()  # the sites that did open a session should not keep it (nor their holds)
            if hold is not None and isinstance(exc, SiteError):
                what = "; nothing was released or charged at any site (the others' holds were cancelled)"
                exc.message += what
                exc.args = (exc.args[0] + what,)
            raise
        self.score_source = described[0] or source.score_column or "GLM model"

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def sites(self) -> list[str]:
        """Site names in federation order."""
        return [c.name for c in self.connections]

    def _each(self, step: str, fn, *, quiet: bool = False) -> list:
        if not quiet:
            self.progress(step, None, f"asking {len(self.connections)} sites")
        done = None if quiet else (lambda site: self.progress(step, site, "done"))
        return fan_out(self.connections, fn, on_done=done, executor=self.executor)

    def _sid(self, conn) -> str:
        return self.session_ids[conn.name]

    # -- all or nothing -------------------------------------------------------------------------
    def hold(self, step: str, prepare: Callable[[SiteConnection], pb.PrepareRequest], *,
             follow_ups: dict | None = None) -> dict[str, str]:
        """Every site checks a release and holds its budget before any site releases (PrepareRelease).

        ``prepare(conn)`` is the site's request. When any site refuses or cannot be reached, every hold
        is cancelled (a hold not cancelled expires within a minute; so are the follow-up holds made, and those
        the requests were to take over) and that site's error is raised: no site was charged. Returns each site's
        reservation id: "" when the release was made before (its replay is free) or the site predates
        PrepareRelease (it checks and charges at the release). ``follow_ups``: filled with each site's hold of the
        release that follows (``PrepareRequest.follow_up``).
        """
        requests = {c.name: prepare(c) for c in self.connections}

        def one(conn):
            try:
                return conn.call("PrepareRelease", requests[conn.name])
            except SiteError as exc:
                if exc.code == grpc.StatusCode.UNIMPLEMENTED:
                    return pb.PrepareResponse()
                raise

        replies = fan_out_partial(self.connections, one, executor=self.executor)
        holds = {c.name: r.reservation_id for c, r in zip(self.connections, replies) if not isinstance(r, SiteError)}
        made = {c.name: r.follow_up_reservation_id for c, r in zip(self.connections, replies)
                if not isinstance(r, SiteError) and r.follow_up_reservation_id}
        failed = [r for r in replies if isinstance(r, SiteError)]
        if failed:
            taken = {name: q.follow_up_reservation_id for name, q in requests.items() if q.follow_up_reservation_id}
            for held in (holds, made, taken):
                self.cancel(held)
            _explain(failed, "; nothing was released or charged at any site (the others' holds were cancelled)")
        if follow_ups is not None:
            follow_ups.update(made)
        self.progress(step, None, f"{len(holds)} sites checked the request and hold its budget")
        return holds

    def cancel(self, holds: Mapping[str, str]) -> None:
        """Return held budgets at once (best effort: a hold not cancelled expires by itself)."""
        live = [c for c in self.connections if holds.get(c.name)]
        fan_out_partial(live, lambda c: c.call("CancelReservation", pb.CancelReservationRequest(
            reservation_id=holds[c.name]), timeout=5.0), executor=self.executor)

    def commit(self, step: str, holds: Mapping[str, str], release: Callable[[SiteConnection, str], object]) -> list:
        """Make every site's held release: ``release(conn, reservation_id)``, results in site order.

        A site that fails now (down since it held) is named with the sites that did release: their
        charges stand with their releases delivered, and the same request replays them at no charge.
        """
        replies = fan_out_partial(self.connections, lambda c: release(c, holds.get(c.name, "")),
                                  on_done=lambda site: self.progress(step, site, "done"), executor=self.executor)
        failed = [r for r in replies if isinstance(r, SiteError)]
        if failed:
            self.cancel({r.site: holds.get(r.site, "") for r in failed})
            done = [c.name for c, r in zip(self.connections, replies) if not isinstance(r, SiteError)]
            _explain(failed, (f"; {', '.join(done)} released and charged their part (delivered here; the same request "
                              "replays it at no charge)" if done else "; nothing was charged")
                     + "; the failed sites' holds return to their budgets")
        return replies

    # -- steps ----------------------------------------------------------------------------------
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

        def stream(conn, req) -> dict:
            # Each chunk is copied into its class's array as it arrives: no list of chunks, no joined copy.
            # A ReleaseInfo starts each class (both classes come in one stream when asked).
            got: dict = {}
            current: list = []

            def take(chunk):
                if chunk.HasField("info"):
                    cls = chunk.info.score_class
                    if cls in got or cls not in (pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES):
                        raise ValueError(f"the release stream sent class {cls} twice or an unknown class")
                    current[:] = [cls]
                    got[cls] = {"info": chunk.info, "scores": np.empty(chunk.info.n), "filled": 0}
                elif not current:
                    raise ValueError("the release stream did not start with its ReleaseInfo")
                data = chunk.scores  # each read of the field is a copy of its bytes
                if len(data) % 8:
                    raise ValueError("the release stream's scores are not float64 values (a multiple of 8 bytes)")
                into = got[current[0]]
                part, filled = np.frombuffer(data, dtype="<f8"), into["filled"]
                if filled + part.size > into["scores"].size:
                    raise ValueError(f"the release announced {into['info'].n} scores but sent more")
                into["scores"][filled:filled + part.size] = part
                into["filled"] = filled + part.size

            conn.call("ReleaseNoisyScores", req, stream=True, timeout=timeout, on_message=take)
            if not got:
                raise ValueError("the release stream did not start with its ReleaseInfo")
            for into in got.values():
                if into["filled"] != into["info"].n:
                    raise ValueError(f"the release announced {into['info'].n} scores but sent {into['filled']}")
            return {cls: (into["scores"], into["info"]) for cls, into in got.items()}

        def release_site(conn, held):
            # Both classes in one stream; a site from before that sends the negatives only, then is asked again.
            both = request(conn, pb.SCORE_CLASS_NEGATIVES, held)
            both.both_classes = True
            classes = stream(conn, both)
            if set(classes) == {pb.SCORE_CLASS_NEGATIVES}:
                classes.update(stream(conn, request(conn, pb.SCORE_CLASS_POSITIVES, held)))
            if set(classes) != {pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES}:
                raise ValueError("the release stream did not send both classes")
            (neg, info0), (pos, info1) = classes[pb.SCORE_CLASS_NEGATIVES], classes[pb.SCORE_CLASS_POSITIVES]
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
            size = min(_UPLOAD_CHUNK, self.policies[conn.name].max_chunk_scores or _UPLOAD_CHUNK)

            def section(cls, asked=None):
                yield from _survivor_chunks(parts[cls], size, first=pb.SurvivorChunk(header=pb.SurvivorHeader(
                    session_id=self._sid(conn), score_class=cls, n=totals[cls], segments=segments[cls],
                    answers=asked)).SerializeToString())

            def checked(r, cls):
                if r.n_received != totals[cls]:
                    raise ValueError(f"the site received {r.n_received} of {totals[cls]} survivor scores")
                return r.evaluations_left

            def both():
                yield from section(pb.SCORE_CLASS_NEGATIVES, answers)
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
                        theta=None, grid=None) -> pb.PaperAggregatesRequest:
        """What :meth:`upload_survivors` asks with the upload: the placement moments, Brier sums, calibration
        cells (``n_bins`` or ``edges``) and budget, the confusion matrix at ``threshold`` (answered first) and the
        ROC-GLM parts at ``theta`` on ``grid`` (the fit's first evaluation, :func:`dsroc.fit_rocglm`'s start)."""
        request = pb.PaperAggregatesRequest(calibration=_calibration_request(n_bins, edges))
        if threshold is not None:
            if not np.isfinite(threshold):
                raise ValueError(f"threshold must be finite, got {threshold}")
            request.confusion.threshold = float(threshold)
        if theta is not None:
            request.rocglm.CopyFrom(pb.RocGlmPartsRequest(theta=[float(v) for v in theta], grid=grid_spec(grid)))
        return request

    def _answers(self, replies: Sequence[pb.PaperAggregatesResponse], request: pb.PaperAggregatesRequest) -> PaperAnswers:
        """Every site's answers (``PaperAggregatesResponse``, in site order) combined."""
        curve = dsroc.aggregate_calibration([_calibration_parts(r.calibration) for r in replies], site_names=self.sites)
        confusion = None
        if request.HasField("confusion"):
            # A site that refused it left it out: asked apart, its refusal says why.
            confusion = (_confusion_result(request.confusion.threshold, [r.confusion for r in replies])
                         if all(r.HasField("confusion") for r in replies) else self.confusion(request.confusion.threshold))
        return PaperAnswers(self._pooled_moments([r.moments for r in replies]), _pooled_brier([r.brier for r in replies]),
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

    def placement_variance(self) -> tuple[float, int, int]:
        """Distributed DeLong variance from two passes over the sites' placement values.

        Returns
        -------
        variance, n0, n1
        """
        m = self.placement_moments()
        return m.variance, m.n0, m.n1

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
            r0, r1 = pooled or ValidationSession.pool(releases)
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
        correction, noise = summary or ValidationSession.release_summary(releases, pooled=pooled)
        return dsroc.noise_corrected_auc(mean_pv0=moments.mean_pv0, mean_pv1=moments.mean_pv1,
                                         correction=correction, delong_variance=moments.variance,
                                         noise_variance=noise, level=level, method=method)

    def brier(self) -> tuple[float, int]:
        """Brier score over all sites and the number of patients."""
        replies = self._each("Brier score", lambda c: c.call("BrierParts", pb.BrierPartsRequest(session_id=self._sid(c))))
        return _pooled_brier(replies)

    def calibration(self, *, n_bins: int = 10, edges=None) -> dsroc.CalibrationCurve:
        """Calibration curve from the cells the sites released (cells below q stay at the site)."""
        request = _calibration_request(n_bins, edges)
        replies = self._each("calibration", lambda c: c.call("CalibrationParts", _with_session(request, self._sid(c))))
        return dsroc.aggregate_calibration([_calibration_parts(r) for r in replies], site_names=self.sites)

    def aggregates(self, *, n_bins: int = 10, edges=None) -> tuple["PlacementSummary", tuple[float, int],
                                                                     dsroc.CalibrationCurve, dict[str, pb.BudgetStatus]]:
        """:meth:`placement_moments`, :meth:`brier`, :meth:`calibration` and :meth:`budget` in one round trip
        to every site (``PaperAggregates``); separately from sites that predate that call."""
        request = _calibration_request(n_bins, edges)

        def ask(conn):
            try:
                return conn.call("PaperAggregates", pb.PaperAggregatesRequest(session_id=self._sid(conn),
                                                                              calibration=request))
            except SiteError as exc:
                if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                return None

        replies = self._each("moments, Brier, calibration and budget", ask)
        if any(r is None for r in replies):
            return self.placement_moments(), self.brier(), self.calibration(n_bins=n_bins, edges=edges), self.budget()
        got = self._answers(replies, pb.PaperAggregatesRequest())
        return got.moments, got.brier, got.calibration, got.budgets

    def confusion(self, threshold: float) -> ConfusionResult:
        """Confusion matrix at ``threshold`` summed over the sites (each cell at least q at every site)."""
        if not np.isfinite(threshold):
            raise ValueError(f"threshold must be finite, got {threshold}")
        replies = self._each("confusion matrix", lambda c: c.call(
            "ConfusionParts", pb.ConfusionPartsRequest(session_id=self._sid(c), threshold=float(threshold))))
        return _confusion_result(threshold, replies)

    def budget(self) -> dict[str, pb.BudgetStatus]:
        """Each site's spent and remaining budget for this dataset."""
        replies = self._each("budget", lambda c: c.call("Budget", pb.BudgetRequest(dataset=self.dataset)))
        return {name: r.budget for name, r in zip(self.sites, replies)}

    def privacy(self, releases: Mapping[str, SiteRelease], sensitivities: Mapping[str, pb.SensitivityResponse], *,
                budgets: Mapping[str, pb.BudgetStatus] | None = None) -> dict[str, SitePrivacy]:
        """Per site: Delta, tau, epsilon, delta, what this analysis charged and the budget left (``budgets``:
        :meth:`budget` asked after the release, or None to ask now)."""
        budgets = self.budget() if budgets is None else budgets
        out = {}
        for name in self.sites:
            r, s, b = releases[name], sensitivities[name], budgets[name]
            info = r.info_negatives
            out[name] = SitePrivacy(
                epsilon=info.epsilon, delta=info.delta, noise_sd=info.tau, sensitivity=info.sensitivity,
                sensitivity_rule=info.rule or s.rule, formal_bound=s.formal_bound,
                n=float(r.info_negatives.n + r.info_positives.n),
                mu_charged=float(np.hypot(r.info_negatives.mu_charged, r.info_positives.mu_charged)),
                repeated=bool(r.info_negatives.repeated and r.info_positives.repeated),
                epsilon_spent=b.epsilon_spent, budget_epsilon=b.budget_epsilon, budget_delta=b.budget_delta,
                mu_spent=b.mu_spent, mu_remaining=b.mu_remaining, note=s.note)
        return out

    def close(self, *, wait: bool = True) -> Future | None:
        """Close every site's session (best effort: a site that is gone lets its session expire).

        ``wait=False`` returns at once with a future of the closing (None when nothing was open): a
        :class:`analyst.Federation` waits for it before its next session opens, so the sites' session
        caps see it closed, and keeps it off the end of a validation.
        """
        ids, self.session_ids = self.session_ids, {}
        unused, self._held = self._held, {}  # holds made with the sessions and never used

        def close_one(conn):
            try:
                conn.call("CloseSession", pb.CloseSessionRequest(session_id=ids[conn.name]), timeout=5.0)
            except Exception:  # noqa: BLE001 - closing is best effort; the session expires anyway
                pass

        def close_all():
            if unused:
                self.cancel(unused)
            fan_out([c for c in self.connections if c.name in ids], close_one, executor=self.executor)

        if not ids:
            return None
        if wait or self.executor is None:
            close_all()
            return None
        # On its own thread: the fan-out itself runs on the executor, which must not wait on itself.
        closing: Future = Future()

        def run():
            try:
                close_all()
            finally:
                closing.set_result(None)

        threading.Thread(target=run, daemon=True).start()
        return closing

    def __enter__(self) -> "ValidationSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
