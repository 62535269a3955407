"""The paper protocol's messages: the upload's protobuf encoder, the release stream's reader, the answers' types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

import dsroc
from dsroc.v1 import site_pb2 as pb

from analyst.result.parts import ConfusionResult

__all__ = ["UPLOAD_CHUNK", "PaperAnswers", "PlacementSummary", "SiteRelease", "calibration_parts",
           "calibration_request", "confusion_result", "grid_spec", "parts_at_theta", "pooled_brier", "read_release",
           "survivor_chunks", "with_budget", "with_session"]

UPLOAD_CHUNK = 65536  # scores per streamed message (512 KiB), lowered to the site's policy cap
_SCORES_TAG = bytes([pb.SurvivorChunk.DESCRIPTOR.fields_by_name["scores"].number << 3 | 2])  # length-delimited


def _varint(n: int) -> bytes:
    """``n`` as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def survivor_chunks(arrays: Sequence[np.ndarray], size: int, first: bytes = b"") -> Iterator[bytes]:
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


def read_release(conn, req: pb.ReleaseRequest, *, timeout: float) -> dict:
    """One site's ``ReleaseNoisyScores`` stream read into one array per class: class -> (scores, ReleaseInfo)."""
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
    (:meth:`PaperSession.upload_survivors` with ``answers``)."""

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


def parts_at_theta(r: pb.RocGlmPartsResponse) -> dsroc.PartsAtTheta:
    if len(r.score) != 2 or len(r.information) != 4:
        raise ValueError("malformed RocGlmParts reply (need 2 score and 4 information values)")
    return dsroc.PartsAtTheta(np.array(r.score), np.array(r.information).reshape(2, 2), float(r.deviance))


def pooled_brier(replies) -> tuple[float, int]:
    parts = [dsroc.BrierParts(r.sum_sq, r.n) for r in replies]
    return dsroc.aggregate_brier(parts), sum(p.n for p in parts)


def confusion_result(threshold: float, replies) -> ConfusionResult:
    s = dsroc.aggregate_confusion(dsroc.ConfusionParts(r.tp, r.fp, r.fn, r.tn) for r in replies)
    return ConfusionResult(float(threshold), s.tp, s.fp, s.fn, s.tn, s.sensitivity, s.specificity, s.ppv, s.npv)


def calibration_request(n_bins: int, edges) -> pb.CalibrationPartsRequest:
    return pb.CalibrationPartsRequest(edges=pb.Values(values=dsroc.calibration_edges(n_bins, edges=edges).tolist()))


def with_session(request: pb.CalibrationPartsRequest, session_id: str) -> pb.CalibrationPartsRequest:
    out = pb.CalibrationPartsRequest()
    out.CopyFrom(request)
    out.session_id = session_id
    return out


def calibration_parts(r: pb.CalibrationPartsResponse) -> dsroc.CalibrationParts:
    return dsroc.CalibrationParts(
        edges=np.asarray(r.edges, dtype=np.float64), bins=np.array([b.index for b in r.bins], dtype=np.int64),
        count=np.array([b.count for b in r.bins], dtype=np.int64),
        sum_score=np.array([b.sum_scores for b in r.bins], dtype=np.float64),
        sum_label=np.array([b.sum_labels for b in r.bins], dtype=np.float64),
        suppressed=np.asarray(r.suppressed, dtype=np.int64))


def with_budget(request: pb.PaperAggregatesRequest | None, delta: float | None, release_ids
                ) -> pb.PaperAggregatesRequest | None:
    """A copy of ``request`` whose budget is asked at ``delta`` (or its own) for ``release_ids``, one site's releases in
    this session (:meth:`analyst.session.ValidationSession.budget`); ``request`` itself without a delta."""
    if request is None or not (delta := delta or request.budget.delta):
        return request
    out = pb.PaperAggregatesRequest()
    out.CopyFrom(request)
    out.budget.CopyFrom(pb.BudgetRequest(delta=float(delta), release_ids=list(release_ids)))
    return out
