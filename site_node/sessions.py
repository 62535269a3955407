"""Analyst sessions: what a session is bound to, what it has received, and expiry after inactivity."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable

import numpy as np

from .data.scores import ScoreSpec
from .errors import NotFound, ResourceExhausted
from .rules.guard import SiteSensitivity

if TYPE_CHECKING:  # dsroc.roc.auc imports scipy.special: not before the daemon serves
    from dsroc import SurvivorFunction

__all__ = ["Survivor", "ScoredData", "Session", "SessionStore", "new_session_id"]


def new_session_id() -> str:
    """A fresh session id (128 random bits, hex)."""
    return secrets.token_hex(16)


@dataclass
class Survivor:
    """An uploaded pooled survivor function, its content hash (the query-cap key) and, once computed,
    the session's true placement values under it."""

    function: SurvivorFunction
    digest: str
    placements: np.ndarray | None = None
    models: dict = field(default_factory=dict)  # grid bytes -> dsroc.RocGlmParts on these placements


@dataclass
class ScoredData:
    """The site's true scores and labels for one (dataset, score source, outcome), shared by sessions.

    With ``time_column`` (a survival session's data) ``times`` holds each patient's follow-up time and ``labels``
    the event indicator (1 event, 0 censored). Derived arrays and the site's sensitivity are computed once, on
    first use.
    """

    dataset: str
    outcome: str
    spec: ScoreSpec
    scores: np.ndarray
    labels: np.ndarray
    score_range: tuple[float, float]
    features: dict | None = None
    sensitivity: SiteSensitivity | None = None
    population: str = ""
    time_column: str = ""
    times: np.ndarray | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        # The class sizes, counted once. The class scores in the data's order are split from ``scores`` on demand
        # (:attr:`negatives`, :attr:`positives`) and not kept: what stays is their sorted copies, which every
        # validation reads (its fingerprint, the paper protocol's placements); a kept split was n more scores
        # resident for each prepared (dataset, score, outcome), 8 MB at 10^6 patients.
        self.n_positives = int(np.count_nonzero(self.labels == 1))
        self.n_negatives = int(self.labels.size - np.count_nonzero(self.labels == 1))

    @property
    def negatives(self) -> np.ndarray:
        """True negative scores, in the data's order (a new array each time)."""
        return self.scores[self.labels == 0]

    @property
    def positives(self) -> np.ndarray:
        """True positive scores, in the data's order (a new array each time)."""
        return self.scores[self.labels == 1]

    @property
    def key(self) -> tuple[str, str, str]:
        """(population, score source, outcome): what ledger records about answers are keyed by.

        The population, not the dataset name: entries over the same patients share every record."""
        return self.population or self.dataset, self.spec.key, self.outcome

    @cached_property
    def sorted_negatives(self) -> np.ndarray:
        """True negative scores, ascending."""
        return np.sort(self.negatives)

    @cached_property
    def sorted_positives(self) -> np.ndarray:
        """True positive scores, ascending."""
        return np.sort(self.positives)

    @property
    def survival(self) -> bool:
        """Whether this is a survival session's data (opened with a time column)."""
        return bool(self.time_column)

    @cached_property
    def fingerprint(self) -> str:
        """Hash of the sorted class scores (with the follow-up times, each patient's (time, event, score) in one
        canonical order): detects a dataset that changed since a persisted release."""
        h = hashlib.sha256()
        h.update(self.sorted_negatives.tobytes())
        h.update(b"|")
        h.update(self.sorted_positives.tobytes())
        if self.times is not None:
            order = np.lexsort((self.scores, self.labels, self.times))
            for values in (self.times, self.labels, self.scores):
                h.update(b"|")
                h.update(np.ascontiguousarray(values[order], dtype=np.float64).tobytes())
        return h.hexdigest()


@dataclass
class Session:
    """One analyst's session: the shared data it is bound to and the survivor functions it received."""

    session_id: str
    analyst: str
    data: ScoredData
    survivors: dict = field(default_factory=dict)  # dsroc.v1.ScoreClass value -> Survivor
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class SessionStore:
    """Open sessions in memory; a session unused for ``idle_seconds`` is gone (``NOT_FOUND``).

    Sessions do not survive a restart; the ledger (releases, query caps) does.
    """

    def __init__(self, *, idle_seconds: float, max_sessions: int, max_per_analyst: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.idle_seconds = float(idle_seconds)
        self.max_sessions = int(max_sessions)
        self.max_per_analyst = int(max_per_analyst or max_sessions)
        self._clock = clock
        self._sessions: dict[str, tuple[Session, float]] = {}
        self._lock = threading.Lock()
        self.on_close: Callable[[], None] | None = None  # called when sessions are let go (the daemon's FreedMemory)
        # Called with the sessions that ended (closed or expired), outside the store's lock: the site returns their
        # holds to the budget (Site.end_sessions).
        self.on_end: Callable[[list[Session]], None] | None = None

    def _purge(self, now: float) -> list[Session]:
        """Forget the sessions idle too long (call with the lock held); the ended sessions, for :meth:`_ended`."""
        expired = [sid for sid, (_, seen) in self._sessions.items() if now - seen > self.idle_seconds]
        return [self._sessions.pop(sid)[0] for sid in expired]

    def _ended(self, sessions: list[Session]) -> None:
        """Tell the hooks that ``sessions`` ended (call without the lock)."""
        if not sessions:
            return
        if self.on_end is not None:
            self.on_end(sessions)
        if self.on_close is not None:
            self.on_close()

    def add(self, analyst: str, make: Callable[[str], Session], *, session_id: str = "") -> Session:
        """Create a session of ``analyst`` via ``make(session_id)`` (``session_id``: fresh unless given) and store it."""
        expired: list[Session] = []
        try:
            with self._lock:
                now = self._clock()
                expired = self._purge(now)
                if len(self._sessions) >= self.max_sessions:
                    raise ResourceExhausted(
                        f"this site has {self.max_sessions} open sessions, its limit; close sessions you no longer need"
                    )
                if sum(s.analyst == analyst for s, _ in self._sessions.values()) >= self.max_per_analyst:
                    raise ResourceExhausted(
                        f"you have {self.max_per_analyst} open sessions at this site, the limit per analyst; "
                        "close sessions you no longer need"
                    )
                session = make(session_id or new_session_id())
                self._sessions[session.session_id] = (session, now)
            return session
        finally:
            self._ended(expired)

    def get(self, analyst: str, session_id: str) -> Session:
        """The analyst's session, refreshing its activity time; :class:`NotFound` if unknown or expired."""
        with self._lock:
            now = self._clock()
            expired = self._purge(now)
            entry = self._sessions.get(session_id)
            if entry is not None and entry[0].analyst == analyst:
                self._sessions[session_id] = (entry[0], now)
        self._ended(expired)
        # Another analyst's session is "not found": session ids are not shared.
        if entry is None or entry[0].analyst != analyst:
            raise NotFound(f"session {session_id!r} does not exist or has expired after inactivity; open a new one")
        return entry[0]

    def close(self, analyst: str, session_id: str) -> None:
        """Forget a session (its holds end with it: :attr:`on_end`)."""
        self.get(analyst, session_id)
        with self._lock:
            entry = self._sessions.pop(session_id, None)
        self._ended([entry[0]] if entry is not None else [])

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
