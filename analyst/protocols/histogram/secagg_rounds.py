"""The secagg round at the analyst: relay every site's key and receipt, then unmask the sum (never a site's counts).

All or nothing: every site holds its budget when it masks; a round abandoned before the seeds are asked
for returns every hold (CancelReservation), so no site is charged unless every site answered. A round advertised
with ``dropouts`` goes on without up to that many sites that fail to mask: the survivors confirm their set
(SecAggConfirm) and reveal, beside their self seeds, their pairwise seeds with the sites that dropped out.
"""

from __future__ import annotations

import copy
import secrets
import weakref
from dataclasses import dataclass, field, replace
from typing import Mapping

import grpc
import numpy as np

from dsroc.histogram.stages import SUMS_RESOLUTION, release_parts
from dsroc.privacy.distributed import summed_noise_variance
from dsroc.secagg import (check_plausible, honest_shares, masked_digest, remove_pair_masks, round_transcript,
                          seed_commitment, unmask_sum)
from dsroc.secagg.calibrations import cached_share_sigma
from dsroc.v1 import site_pb2 as pb

from analyst.connection import SiteError, fan_out_partial
from analyst.session import raise_first_failure

__all__ = ["SecAggAborted", "SecAggRound", "SecAggSum", "advertise_round", "next_round", "mask_round", "verify_masked",
           "confirm_round", "unmask_round", "among", "sum_round", "masked_vector", "collect_secagg", "round_colluders", "cancel_follow_ups"]


_NAMES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # connection -> the site's own name


class SecAggAborted(RuntimeError):
    """A secure-aggregation round that cannot give a sum (nothing about any site's counts was learnt)."""


@dataclass
class SecAggRound:
    """One round in progress: its id, each site's own name, advertisement, masked vector and seed."""

    round_id: bytes
    names: Mapping[str, str]  # federation name -> the site's own name (its peers know it by that)
    colluders: int
    advertisements: dict
    masked: dict | None = None  # the surviving sites' masked vectors (every site's in a round without dropouts)
    unmasked: dict | None = None
    dropouts: int = 0
    confirmations: dict | None = None
    lost: tuple = ()  # sites of the session unreachable when the round was advertised (not in it)
    asked: tuple = (float("nan"), float("nan"))  # the round's (epsilon, delta): what each unmasking site charges

    @property
    def unmasked_sites(self) -> list[str]:
        """The sites that advertised but did not mask (federation names): the survivors remove their pair masks."""
        return [name for name in self.advertisements if name not in (self.masked or {})]

    @property
    def dropped(self) -> list[str]:
        """The sites lost before the advertisement or that advertised but did not mask (federation names)."""
        return [*self.lost, *self.unmasked_sites]

    @property
    def follow_ups(self) -> dict[str, str]:
        """Each site's hold of the next round (made with this round's mask when it was advertised with one)."""
        return {name: m.follow_up_reservation_id for name, m in (self.masked or {}).items()
                if m.follow_up_reservation_id}

    @property
    def holds(self) -> dict[str, str]:
        """Each site's hold of this round (made by its mask; empty for a free replay)."""
        return {name: m.reservation_id for name, m in (self.masked or {}).items() if m.reservation_id}

    @property
    def transcript(self) -> bytes:
        """The round transcript every site bound its keys to (recomputed from the advertisements)."""
        ads = self.advertisements.values()
        first = next(iter(ads))
        return round_transcript(first.round_id, first.request_sha256, {a.site: a.public_key for a in ads})


@dataclass(frozen=True)
class SecAggSum:
    """The unmasked sum of the sites' noisy counts and what its noise is.

    Attributes
    ----------
    edges : ndarray
        The public grid.
    counts0, counts1 : ndarray
        Summed noisy counts of negatives and positives per bin.
    share_sigma : float
        Discrete Gaussian parameter of each site's share of the noise.
    noise_sd : float
        Standard deviation of the summed noise per cell (all sites' shares).
    colluders : int
        The coalition size t the shares are sized for.
    sites : dict of str to SecAggUnmaskResponse
        Each site's answer to the last step (release id, repeated, honest shares, budget spent).
    sums0, sums1 : ndarray or None
        With score sums: the summed noisy per-bin sums of the classes' score offsets, in bin widths.
    sums_sd : float
        Standard deviation of the summed noise of one score sum, in bin widths (0 without sums).
    follow_ups : dict of str to str
        With a next round: each site's hold of it (:func:`mask_round`'s ``follow_ups``).
    dropped : tuple of str
        The sites that dropped out of a round with dropouts (not in the sum, not charged).
    time_edges, cells : ndarray or None
        A survival round's full time grid and its summed noisy (K x 2 x J) cells, time-major (``counts0`` and
        ``counts1`` then empty).
    """

    edges: np.ndarray
    counts0: np.ndarray
    counts1: np.ndarray
    share_sigma: float
    noise_sd: float
    colluders: int
    sites: Mapping[str, pb.SecAggUnmaskResponse]
    sums0: np.ndarray | None = None
    sums1: np.ndarray | None = None
    sums_sd: float = 0.0
    follow_ups: Mapping[str, str] = field(default_factory=dict)
    dropped: tuple = ()
    time_edges: np.ndarray | None = None
    cells: np.ndarray | None = None


def round_colluders(session, colluders: int | None) -> int:
    """The round's coalition size: ``colluders``, or the largest any site's policy requires."""
    needed = max(int(p.secagg_colluders) for p in session.policies.values())
    if colluders is None:
        return needed
    if colluders < needed:
        raise ValueError(f"colluders {colluders} is below what a site's policy requires ({needed})")
    return int(colluders)


def _own_name(conn) -> str:
    """The site's own name (as its peers know it), asked once per connection."""
    name = _NAMES.get(conn)
    if name is None:
        name = _NAMES[conn] = conn.call("Describe", pb.DescribeRequest()).site_name
    return name


def among(session, names):
    """A view of ``session`` over the sites ``names`` only (the survivors of a round with dropouts)."""
    view = copy.copy(session)
    view.connections = [c for c in session.connections if c.name in set(names)]
    return view


def _share_sigma(session, epsilon: float, delta: float, colluders: int, score_sums: bool,
                 summed_sigma: float | None, dropouts: int = 0) -> float:
    """The share every site adds, calibrated once here (each site checks it by one accountant evaluation), for the
    honest shares of the fewest survivors."""
    honest = honest_shares(len(session.sites) - int(dropouts), int(colluders))
    return cached_share_sigma(float(epsilon), float(delta), honest, parts=tuple(release_parts(score_sums=bool(score_sums))),
                              hint=None if summed_sigma is None else float(summed_sigma) / honest**0.5,
                              cache=session.calibrations)


def next_round(session, *, epsilon: float, delta: float, colluders: int, score_sums: bool = False,
               summed_sigma: float | None = None, dropouts: int = 0) -> pb.SecAggNextRound:
    """The round that will follow over the same sites, to advertise with the current one (``next_round`` of
    :func:`advertise_round`): every site checks it and holds its budget with the current round's at the mask."""
    return pb.SecAggNextRound(epsilon=float(epsilon), delta=float(delta), score_sums=bool(score_sums),
                              share_sigma=_share_sigma(session, epsilon, delta, colluders, score_sums, summed_sigma,
                                                       dropouts))


def advertise_round(session, *, epsilon: float, delta: float, n_bins: int = 0, spacing: str = "", colluders: int,
                    interior=None, score_sums: bool = False, summed_sigma: float | None = None,
                    next_round: pb.SecAggNextRound | None = None, dropouts: int = 0,
                    survival_edges=None) -> SecAggRound:
    """Step 1: every site checks the request and signs a fresh round key (nothing is held or charged).

    ``interior``: explicit interior edges instead of ``n_bins`` and ``spacing``; ``score_sums``: also the
    per-bin score sums of each class; ``summed_sigma``: a central calibration's noise for the round (the
    share's calibration starts from it, :func:`dsroc.secagg.share_sigma`'s ``hint``); ``next_round``: the
    round that follows (:func:`next_round`), held with this one; ``dropouts``: how many sites may fail to mask
    without aborting the round (the shares are sized for the fewest survivors); ``survival_edges``: a survival
    round's interior time edges (the sessions' survival cells instead of the per-class counts).
    """
    names = dict(zip(session.sites, session._each("secagg names", _own_name, quiet=True)))
    round_id = secrets.token_bytes(32)
    if interior is not None:
        n_bins, spacing = 0, ""
    sigma = _share_sigma(session, epsilon, delta, colluders, score_sums, summed_sigma, dropouts)
    request = dict(round_id=round_id, epsilon=float(epsilon), delta=float(delta), n_bins=int(n_bins), spacing=spacing,
                   sites=sorted(names.values()), colluders=int(colluders), score_sums=bool(score_sums),
                   edges=[] if interior is None else [float(v) for v in interior], share_sigma=sigma,
                   next_round=next_round, dropouts=int(dropouts), survival=survival_edges is not None,
                   time_edges=[] if survival_edges is None else [float(v) for v in survival_edges])
    ads = session._each("secagg keys", lambda c: c.call("SecAggAdvertise", pb.SecAggAdvertiseRequest(
        session_id=session.session_ids[c.name], **request)))
    ads = dict(zip(session.sites, ads))
    first = next(iter(ads.values()))
    for name, ad in ads.items():
        if ad.request_sha256 != first.request_sha256:
            raise SecAggAborted(f"site {name} checked another request than {session.sites[0]} (another grid: "
                                "different score ranges?); its counts cannot be summed with the others'")
    return SecAggRound(round_id, names, int(colluders), ads, dropouts=int(dropouts),
                       asked=(float(epsilon), float(delta)))


def cancel_follow_ups(session, follow_ups: Mapping[str, str] | None) -> None:
    """Return the next round's holds (a round that will not follow; one taken over already is not affected)."""
    if follow_ups:
        session.cancel(follow_ups)


def mask_round(session, r: SecAggRound, follow_ups: Mapping[str, str] | None = None) -> SecAggRound:
    """Step 2: every site gets every site's signed key, holds its budget and answers with its masked counts and a
    signed receipt. When a site refuses (its budget, say) or cannot be reached, or a vector does not match its
    receipt, every hold (this round's, the next round's and the holds ``follow_ups`` that the previous round made
    for this one, which the sites take over) is returned and the error raised: no site was charged."""
    ads = list(r.advertisements.values())
    follow_ups = dict(follow_ups or {})
    replies = fan_out_partial(session.connections, lambda c: c.call("SecAggMask", pb.SecAggMaskRequest(
        session_id=session.session_ids[c.name], round_id=r.round_id, advertisements=ads,
        follow_up_reservation_id=follow_ups.get(c.name, ""))),
        on_done=lambda site: session.progress("secagg masked counts", site, "done"), executor=session.executor)
    r.masked = {c.name: m for c, m in zip(session.connections, replies) if not isinstance(m, SiteError)}
    failed = [m for m in replies if isinstance(m, SiteError)]
    if failed and len(failed) <= r.dropouts:  # the round goes on without them: nothing of theirs is held or summed
        cancel_follow_ups(session, {e.site: follow_ups[e.site] for e in failed if e.site in follow_ups})
        session.progress("secagg masked counts", None, f"{', '.join(e.site for e in failed)} dropped out "
                         f"({len(r.masked)} sites go on; the round tolerates {r.dropouts})")
    elif failed:
        _cancel_all(session, r, follow_ups)
        raise_first_failure(failed, "; the secagg round is abandoned before any seed was revealed: "
                                    + (f"it charged no site (the others' holds were returned); {charged}"
                                       if (charged := session.charges_so_far()) else
                                       "nothing was charged at any site (the others' holds were returned)"))
    try:
        return verify_masked(r)
    except SecAggAborted:
        _cancel_all(session, r, follow_ups)
        raise


def _cancel_all(session, r: SecAggRound, follow_ups: Mapping[str, str]) -> None:
    """Return this round's holds, the next round's and those this round was to take over."""
    for holds in (r.holds, follow_ups, r.follow_ups):
        cancel_follow_ups(session, holds)


def verify_masked(r: SecAggRound) -> SecAggRound:
    """Refuse the round when a masked vector is not the one its site's receipt names (altered in transit)."""
    for name, m in r.masked.items():
        if m.receipt.site != r.names[name] or masked_digest(masked_vector(m)) != m.receipt.masked_sha256:
            raise SecAggAborted(f"site {name}'s masked counts do not match its receipt; the round is aborted "
                                "before any site revealed its seed (it charged no site)")
    return r


def confirm_round(session, r: SecAggRound) -> SecAggRound:
    """Between steps 2 and 3 of a round with dropouts: every survivor signs the set of survivors (their receipts).
    When one fails, every hold is returned and the error raised: nothing was revealed or charged."""
    if not r.dropouts:
        return r
    survivors = among(session, r.masked)
    receipts = [m.receipt for m in r.masked.values()]
    replies = fan_out_partial(survivors.connections, lambda c: c.call("SecAggConfirm", pb.SecAggConfirmRequest(
        session_id=session.session_ids[c.name], round_id=r.round_id, receipts=receipts)), executor=session.executor)
    failed = [m for m in replies if isinstance(m, SiteError)]
    if failed:
        _cancel_all(session, r, {})
        raise_first_failure(failed, "; the survivors did not all confirm: "
                                    + (f"this round revealed and charged nothing (the holds were returned); {charged}"
                                       if (charged := session.charges_so_far()) else
                                       "nothing was revealed or charged at any site (the holds were returned)"))
    r.confirmations = {c.name: m for c, m in zip(survivors.connections, replies)}
    return r


def unmask_round(session, r: SecAggRound) -> SecAggRound:
    """Step 3: every site (every survivor, with every survivor's confirmation, in a round with dropouts) gets every
    receipt, turns its hold into the charge and reveals its seed (and its pairwise seeds with the sites that dropped
    out). A site that fails now (down since it masked) leaves no sum: the others' charges stand (their seeds were
    revealed) and the failed sites' holds are returned."""
    receipts = [m.receipt for m in r.masked.values()]
    confirmations = list((r.confirmations or {}).values())
    survivors = among(session, r.masked)
    seeds = fan_out_partial(survivors.connections, lambda c: c.call("SecAggUnmask", pb.SecAggUnmaskRequest(
        session_id=session.session_ids[c.name], round_id=r.round_id, receipts=receipts, confirmations=confirmations)),
        on_done=lambda site: session.progress("secagg seeds", site, "done"), executor=session.executor)
    failed = [m for m in seeds if isinstance(m, SiteError)]
    done = [c.name for c, m in zip(survivors.connections, seeds) if not isinstance(m, SiteError)]
    session.record_charges(done, *r.asked, replayable=False)  # a revealed seed turned its site's hold into the charge
    if failed:
        session.cancel({e.site: r.masked[e.site].reservation_id for e in failed})
        raise_first_failure(failed, f"; no sum: {', '.join(done) or 'no site'} revealed its seed and was charged, "
                                    f"the failed sites' holds were returned; {session.charges_text()}")
    r.unmasked = dict(zip(survivors.sites, seeds))
    for name, m in r.unmasked.items():
        session.note_release(name, m.release_id)
    transcript = r.transcript
    for name, s in r.unmasked.items():
        if seed_commitment(transcript, s.self_seed) != r.masked[name].receipt.commitment:
            raise SecAggAborted(f"site {name} revealed a seed that is not the one it committed to; no sum")
    return r


def sum_round(r: SecAggRound) -> SecAggSum:
    """The sum of the (surviving) sites' noisy counts: the masked vectors summed less the self masks (and the
    survivors' pairwise masks with the sites that dropped out)."""
    names = list(r.masked)
    total = unmask_sum([masked_vector(r.masked[n]) for n in names], [r.unmasked[n].self_seed for n in names])
    dropped = {r.names[n]: n for n in r.unmasked_sites}  # own name -> federation name
    pairs = [(r.names[n], p.peer, p.seed) for n in names for p in r.unmasked[n].pair_seeds]
    if sorted((site, peer) for site, peer, _ in pairs) != sorted((r.names[n], v) for n in names for v in dropped):
        raise SecAggAborted("the survivors did not reveal one pairwise seed per site that dropped out; no sum")
    total = remove_pair_masks(total, pairs)
    try:
        check_plausible(total)
    except ValueError as exc:
        raise SecAggAborted(str(exc)) from None
    first = next(iter(r.advertisements.values()))
    edges = np.asarray(first.edges, dtype=np.float64)
    m = edges.size - 1
    sigma, k = float(first.share_sigma), len(names)
    sd = float(np.sqrt(summed_noise_variance(sigma, k)))
    if len(first.time_edges):  # a survival round: every cell, as ReleaseSurvival orders them
        return SecAggSum(edges, np.empty(0), np.empty(0), sigma, sd, r.colluders, dict(r.unmasked),
                         dropped=tuple(r.dropped), time_edges=np.asarray(first.time_edges, dtype=np.float64),
                         cells=total.copy())
    sums = {}
    if first.sums_share_sigma > 0:  # the sums follow the counts, in units of 1 / SUMS_RESOLUTION bin width
        sums = dict(sums0=total[2 * m:3 * m] / SUMS_RESOLUTION, sums1=total[3 * m:4 * m] / SUMS_RESOLUTION,
                    sums_sd=float(np.sqrt(summed_noise_variance(first.sums_share_sigma, k))) / SUMS_RESOLUTION)
    return SecAggSum(edges, total[:m].copy(), total[m:2 * m].copy(), sigma, sd, r.colluders, dict(r.unmasked), **sums,
                     dropped=tuple(r.dropped))


def masked_vector(masked: pb.SecAggMaskResponse) -> np.ndarray:
    """A site's masked vector as uint64."""
    return np.frombuffer(masked.masked, dtype="<u8").astype(np.uint64)


def collect_secagg(session, *, epsilon: float, delta: float, n_bins: int = 0, spacing: str = "equal",
                   colluders: int | None = None, interior=None, score_sums: bool = False,
                   summed_sigma: float | None = None, following: Mapping | None = None,
                   follow_ups: Mapping[str, str] | None = None, dropouts: int = 0,
                   survival_edges=None) -> SecAggSum:
    """One secure-aggregation round over an open :class:`analyst.session.ValidationSession` (see
    :func:`advertise_round` for ``interior``, ``score_sums`` and ``survival_edges``).

    ``following``: the keyword arguments of :func:`next_round` for a round that will follow over the same sites,
    held with this one (the result's ``follow_ups``); ``follow_ups``: the holds a previous round made for this one.
    When this round fails, every hold it made or was to take over is returned. ``dropouts``: see
    :func:`advertise_round` (the next round is sized for the same fewest survivors).
    """
    t, lost, whole = round_colluders(session, colluders), [], session
    try:
        nxt = None if following is None else next_round(session, colluders=t, dropouts=dropouts, **following)
        while True:  # a site unreachable at the advertisement is left out while dropouts remain (nothing is held)
            try:
                r = advertise_round(session, epsilon=epsilon, delta=delta, n_bins=n_bins, spacing=spacing,
                                    colluders=t, interior=interior, score_sums=score_sums, summed_sigma=summed_sigma,
                                    next_round=nxt, dropouts=dropouts - len(lost), survival_edges=survival_edges)
                break
            except SiteError as exc:
                if len(lost) >= dropouts or exc.code not in _UNREACHABLE:
                    raise
                lost.append(exc.site)
                session = among(whole, [name for name in whole.sites if name not in lost])
    except BaseException:
        cancel_follow_ups(whole, follow_ups)
        raise
    r.lost = tuple(lost)
    r = mask_round(session, r, follow_ups)  # returns every hold itself when it fails
    try:
        total = sum_round(unmask_round(session, confirm_round(session, r)))
    except BaseException:
        cancel_follow_ups(session, r.follow_ups)  # no next round after a failed one
        raise
    return replace(total, follow_ups=r.follow_ups)


# What makes a site a dropout at the advertisement (a refusal there is the request's problem, not the site's).
_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
