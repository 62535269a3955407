"""A site's secagg rounds: the messages it signs in a round, each round's state, kept per analyst within a quota."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ...errors import FailedPrecondition
from ...store.ledger import ReleaseKey
from .release import HistogramPlan
from .survival import SurvivalPlan

__all__ = ["ROUNDS_PER_ANALYST", "Advertisement", "Receipt", "MaskedRelease", "Unmasked", "Round", "RoundStore",
           "fewest_survivors"]

# Rounds kept in memory per analyst (its oldest forgotten first; a forgotten round cannot be finished). Each
# analyst's rounds are its own: another analyst's advertisements never evict them. A validation runs one or two
# rounds at a time; what the site keeps is bounded by the configured analysts times this.
ROUNDS_PER_ANALYST = 64


@dataclass(frozen=True)
class Advertisement:
    """A site's signed round key (what the analyst relays to every site of the round)."""

    site: str
    round_id: bytes
    request_sha256: str
    public_key: bytes
    signature: bytes
    edges: tuple = ()
    share_sigma: float = 0.0
    site_colluders: int = 0
    sums_share_sigma: float = 0.0
    time_edges: tuple = ()  # a survival round's full time grid


@dataclass(frozen=True)
class Receipt:
    """A site's signed statement that it sent this masked vector, with this self-seed commitment, in this round."""

    site: str
    masked_sha256: str
    commitment: str
    signature: bytes


@dataclass(frozen=True)
class MaskedRelease:
    """The masked noisy counts (uint64, mod 2^64) and their receipt."""

    masked: np.ndarray
    receipt: Receipt
    reservation_id: str = ""
    follow_up_id: str = ""  # the next round's hold (a two-round validation), held with this one


@dataclass(frozen=True)
class Unmasked:
    """The self seed, once the round is complete, and what the ledger recorded."""

    self_seed: bytes
    release_id: str
    charged: bool
    epsilon_spent: float
    honest: int
    pair_seeds: tuple = ()  # (peer, seed) of each site of the round that dropped out (rounds with dropouts)


@dataclass
class Round:
    """One round's state at this site: its request and key, then its keys, masked vector and seeds as it goes."""

    analyst: str
    session_id: str
    request: dict
    digest: str
    private: X25519PrivateKey
    advertisement: Advertisement
    key: ReleaseKey
    plan: HistogramPlan
    follow_up: tuple = ()  # the next round's events, held with this round's at the mask
    # a survival round's grids and share (what it charges are the round's events, not the plan's own)
    survival: SurvivalPlan | None = None
    transcript: bytes = b""
    keys: dict = field(default_factory=dict)  # every site's round key (fixed at the mask)
    survivors: tuple | None = None  # the surviving sites this site confirmed (rounds with dropouts; once)
    confirmation: bytes = b""
    masked: MaskedRelease | None = None
    payload: bytes = b""
    self_seed: bytes = b""
    unmasked: Unmasked | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class RoundStore:
    """The rounds in memory, by analyst and round id: each analyst keeps its :data:`ROUNDS_PER_ANALYST` newest."""

    def __init__(self, per_analyst: int = ROUNDS_PER_ANALYST):
        self.per_analyst = int(per_analyst)
        self._rounds: dict[str, OrderedDict[bytes, Round]] = {}
        self._lock = threading.Lock()

    def get_or_add(self, analyst: str, round_id: bytes, make) -> tuple[Round, bool]:
        """The analyst's round ``round_id``, or a new one from ``make()`` (then its oldest beyond the quota are
        forgotten); whether it is new. ``make`` runs under the store's lock: it must be quick and raise nothing
        it did not check."""
        with self._lock:
            rounds = self._rounds.setdefault(analyst, OrderedDict())
            old = rounds.get(round_id)
            if old is not None:
                return old, False
            rounds[round_id] = new = make()
            while len(rounds) > self.per_analyst:
                rounds.popitem(last=False)
            return new, True

    def survival(self, analyst: str, round_id: bytes) -> bool:
        """Whether the analyst's round ``round_id`` is a survival round (False when not held)."""
        with self._lock:
            r = self._rounds.get(analyst, {}).get(round_id)
        return r is not None and r.survival is not None

    def get(self, session, round_id: bytes) -> Round:
        """The round ``round_id`` of the session's analyst advertised in this session (FailedPrecondition otherwise)."""
        with self._lock:
            r = self._rounds.get(session.analyst, {}).get(bytes(round_id))
        if r is None or r.session_id != session.session_id:
            raise FailedPrecondition(
                "secagg: no round with this round_id in this session (advertise it first; a round does not survive "
                f"a restart of the site, and a site keeps at most {self.per_analyst} rounds per analyst, its oldest "
                "forgotten first)")
        return r


def fewest_survivors(request: dict) -> int:
    """The fewest sites whose sum a round reveals: its sites less the dropouts it tolerates."""
    return len(request["sites"]) - int(request.get("dropouts", 0))
