"""The secagg protocol at the site: key advertisement, masked noisy histograms, and the self seed once a round is complete.

A round has three steps, all relayed by the analyst (sites never reach each other):

1. ``advertise``: the site checks the request (grid, epsilon, delta, the round's sites, the coalition
   size its share is sized for) and signs a fresh X25519 key bound to the round and the request;
2. ``mask``: given every site's signed key, it holds the release's budget in its ledger (a reservation,
   as PrepareRelease; the analyst returns it by CancelReservation when the round is abandoned, else it
   expires), adds its share of the distributed discrete Gaussian noise to its per-class counts (and,
   when asked, per-bin score sums) and masks them (Bonawitz et al. 2017: one self mask and one mask per
   pair) under the round's transcript, and signs a receipt of the masked vector and its self-seed
   commitment;
3. ``unmask``: given every site's signed receipt (all sites sent their masked vector in this round, so
   every site holds its budget), it turns its hold into the charge and reveals its self seed. Then, and
   only then, the analyst can compute the sum. A round that stops before this step has revealed nothing
   and charged nothing.
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import replace

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from dsroc.histogram.stages import SUMS_RATIO, SUMS_RESOLUTION, release_parts
from dsroc.privacy.accounting import DiscreteGaussianSum
from dsroc.privacy.noise import sample_discrete_gaussian
from dsroc.secagg import (advertisement_message, honest_shares, mask_vector, masked_digest, pair_seed, receipt_message,
                          request_digest, round_transcript, seed_commitment, survivors_message)
from dsroc.secagg.calibrations import cached_share_sigma, cached_shares_meet
from dsroc.survival.release import encode_survival_release

from ...errors import FailedPrecondition, InvalidArgument, PermissionDenied
from ...rules.guard import analyst_input, check_release_parameters, require_privacy_level
from ...store.calibrations import CALIBRATIONS_FILE, CalibrationFile
from ...store.ledger import ReleaseKey
from ..base import SiteProtocol
from .release import MAX_SIGMA, HistogramPlan, check_noise_size, draw_histogram, histogram_grid
from .secagg_checks import check_advertisements, check_confirmed, check_dropouts, check_receipts, check_sites
from .survival import SurvivalPlan, draw_survival, survival_grids
from .secagg_rounds import (Advertisement, MaskedRelease, Receipt, Round, RoundStore, Unmasked,
                            fewest_survivors)

__all__ = ["PRIVACY_UNIT", "Advertisement", "Receipt", "MaskedRelease", "Unmasked", "SecAggProtocol"]

PRIVACY_UNIT = "add or remove one patient"
ROUND_ID_BYTES = 32
_RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class SecAggProtocol(SiteProtocol):
    """The secagg protocol's three calls, over the site's shared services (policy, ledger, signer, sessions).

    Parameters
    ----------
    site : site_node.site.Site
    """

    name = "secagg"

    def __init__(self, site):
        super().__init__(site)
        self._rounds = RoundStore()
        self._calibrations = CalibrationFile(site.config.state_dir / CALIBRATIONS_FILE)

    # ------------------------------------------------------------------ step 1: advertise
    def advertise(self, session, *, round_id: bytes, epsilon: float, delta: float, n_bins: int, spacing: str,
                  sites, colluders: int, interior=(), score_sums: bool = False,
                  proposed_sigma: float = 0.0, next_round=None, dropouts: int = 0, survival: bool = False,
                  time_edges=()) -> Advertisement:
        """Check a round's request and sign a fresh round key bound to it (nothing is released or charged).

        ``interior``: explicit interior edges instead of ``n_bins`` and ``spacing`` (each an edge of a grid
        the policy allows); ``score_sums``: also each bin's sum of score offsets per class, the counts and
        sums sharing one noise scale so that the whole release is (epsilon, delta)-DP; ``proposed_sigma``: the
        analyst's share parameter, checked by one evaluation of the accountant instead of a calibration here
        (0: calibrate). ``next_round``: ``(epsilon, delta, score_sums, proposed_sigma)`` of the round that follows
        this one over the same sites (the second round of a quantile grid, whose edges this round places), checked
        as this round's and held with it at the mask, so that no site is charged this round and then refuses the
        next for its budget. ``dropouts``: how many sites may fail between the advertisement and the mask without
        aborting the round (their pairwise masks are removed by the survivors, :meth:`confirm`); the share is sized
        for the ``len(sites) - dropouts - colluders`` honest shares a sum over the fewest survivors keeps.
        ``survival``: a survival session's (time bin x status x score bin) counts on the time grid ``time_edges``
        (interior edges), both grids checked as ReleaseSurvival checks them; each patient is one count in one cell,
        so the counts' share and charge are a binary round's without score sums.
        """
        site, policy = self.site, self.policy
        self.require()
        round_id = bytes(round_id)
        if len(round_id) != ROUND_ID_BYTES:
            raise InvalidArgument(f"round_id must be {ROUND_ID_BYTES} random bytes, got {len(round_id)}")
        epsilon, delta = check_release_parameters(policy, epsilon, delta)
        sites = sorted(str(s) for s in sites)
        check_sites(site, sites)
        if isinstance(colluders, bool) or int(colluders) != colluders or not policy.secagg_colluders <= colluders < len(sites):
            raise PermissionDenied(
                f"policy: colluders must lie in [{policy.secagg_colluders}, {len(sites) - 1}] for a round of "
                f"{len(sites)} sites: this site's guarantee must survive coalitions of {policy.secagg_colluders} other "
                f"sites with the analyst (policy.secagg_colluders), got {colluders}")
        floor = len(sites) - check_dropouts(site, dropouts, len(sites), int(colluders))
        survival_plan = self._survival(session, survival, time_edges, n_bins, spacing, interior, score_sums,
                                       next_round, epsilon, delta)
        with analyst_input("epsilon, delta"):
            if survival_plan is None:
                edges, grid, _ = histogram_grid(policy, session.data.score_range, n_bins=n_bins, spacing=spacing,
                                                interior=list(interior) or None)
            else:
                edges, grid = survival_plan.score_edges, ()
            check_noise_size(epsilon, delta)
            # sized on the request's own grid (not the ledger's), so every site computes the same share
            score_sums, honest = bool(score_sums), honest_shares(floor, int(colluders))
            parts = tuple(release_parts(score_sums=score_sums))
            sigma = self._share(session.analyst, float(proposed_sigma), epsilon, delta, honest, parts)
        sums_sigma = SUMS_RATIO * SUMS_RESOLUTION * sigma if score_sums else 0.0
        following, follow_up = self._next_round(session.analyst, next_round, honest, floor)
        plan = HistogramPlan(edges, edges.size - 1, grid, (), epsilon, delta, sigma, 0.0, score_sums, sums_sigma)
        request = {"protocol": "secagg", "edges": edges.tolist(), "epsilon": epsilon, "delta": delta,
                   "sites": sites, "colluders": int(colluders), "share_sigma": sigma}
        if score_sums:  # absent otherwise: rounds of counts only keep their digest and release key
            request.update(score_sums=True, sums_share_sigma=sums_sigma)
        if following:  # absent otherwise, likewise
            request["next_round"] = following
        if floor < len(sites):
            request["dropouts"] = len(sites) - floor
        if survival_plan is not None:  # absent otherwise, likewise
            request["survival"] = {"time": survival_plan.time_column,
                                   "time_edges": survival_plan.time_edges[1:-1].tolist()}
        digest = request_digest(request)

        def make() -> Round:
            private = X25519PrivateKey.generate()
            public = private.public_key().public_bytes(*_RAW)
            signature = site.signer.sign_message(advertisement_message(site.config.name, round_id, digest, public))
            ad = Advertisement(site.config.name, round_id, digest, public, signature, tuple(edges.tolist()),
                               sigma, policy.secagg_colluders, sums_sigma,
                               () if survival_plan is None else tuple(survival_plan.time_edges.tolist()))
            text = json.dumps({k: request[k] for k in ("edges", "epsilon", "delta", "sites", "colluders",
                                                       "score_sums", "dropouts", "survival") if k in request},
                              sort_keys=True)
            if floor < len(sites):  # the survivors are known only after the mask: no replay, each round is charged
                text = json.dumps({"round": round_id.hex(), "request": json.loads(text)}, sort_keys=True)
            release_key = ReleaseKey(*session.data.key, "secagg", text)
            return Round(session.analyst, session.session_id, request, digest, private, ad, release_key, plan,
                         follow_up, survival=None if survival_plan is None else replace(survival_plan, sigma=sigma))

        r, new = self._rounds.get_or_add(session.analyst, round_id, make)
        if not new and (r.digest != digest or r.session_id != session.session_id):
            raise PermissionDenied("secagg: this round id was used for another request; a round is advertised "
                                   "once (start a new round with a fresh round_id)")
        return r.advertisement

    def _survival(self, session, survival, time_edges, n_bins, spacing, interior, score_sums, next_round,
                  epsilon: float, delta: float) -> SurvivalPlan | None:
        """A survival round's grids, checked as ReleaseSurvival checks them (None for a binary round); its noise
        ``sigma`` is left 0 here, the round's share being set once calibrated."""
        if not survival:
            if len(time_edges):
                raise InvalidArgument("time_edges are a survival round's (survival true)")
            self.site.require_kind(session, survival=False)
            return None
        self.site.require_kind(session, survival=True)
        if score_sums or next_round is not None:
            raise InvalidArgument("survival: a survival round sums counts only (score_sums false, next_round unset)")
        data = session.data
        time_grid, score_edges = survival_grids(self.policy, data.score_range, time_edges=time_edges, n_bins=n_bins,
                                                spacing=spacing, edges=interior)
        require_privacy_level(data.n_positives, self.policy.privacy_level, "the events of a survival release")
        return SurvivalPlan(data.time_column, time_grid, score_edges, epsilon, delta, 0.0)

    def survival_round(self, analyst: str, round_id: bytes) -> bool:
        """Whether the analyst's round ``round_id`` is a survival round (False for a round this site does not hold)."""
        return self._rounds.survival(analyst, bytes(round_id))

    def _next_round(self, analyst: str, next_round, honest: int, n_sites: int) -> tuple[dict, tuple]:
        """The next round's checked privacy parameters (for the request digest) and the events its hold charges."""
        if next_round is None:
            return {}, ()
        epsilon, delta, score_sums, proposed = next_round
        where = "next_round.epsilon, next_round.delta"
        try:
            epsilon, delta = check_release_parameters(self.policy, epsilon, delta)
        except (InvalidArgument, PermissionDenied) as exc:
            raise type(exc)(f"next_round: {exc}") from None
        with analyst_input(where):
            check_noise_size(epsilon, delta)
            score_sums, parts = bool(score_sums), tuple(release_parts(score_sums=bool(score_sums)))
            sigma = self._share(analyst, float(proposed), epsilon, delta, honest, parts)
        sums_sigma = SUMS_RATIO * SUMS_RESOLUTION * sigma if score_sums else 0.0
        following = {"epsilon": epsilon, "delta": delta, "share_sigma": sigma, "score_sums": score_sums}
        return following, self._charged_events(n_sites, sigma, sums_sigma)

    def _share(self, analyst: str, proposed: float, epsilon: float, delta: float, honest: int, parts: tuple) -> float:
        """The round's share: the analyst's ``proposed`` sigma once checked by one accountant evaluation, or (0) this
        site's own calibration, a new one within the analyst's CPU allowance (:mod:`site_node.rules.calibrations`;
        ResourceExhausted beyond); both from this site's calibration cache when it computed them before."""
        cache = self._calibrations.cache
        try:
            if not proposed:
                return self.site.calibrations.get(
                    analyst, ("secagg share", epsilon, delta, honest, parts),
                    lambda: cached_share_sigma(epsilon, delta, honest, parts=parts, cache=cache), what="secagg share")
            if not (math.isfinite(proposed) and 0.0 < proposed <= MAX_SIGMA):
                raise InvalidArgument(f"share_sigma must be a positive number of at most {MAX_SIGMA:g}, got {proposed!r}")
            if not cached_shares_meet(proposed, epsilon, delta, honest, parts=parts, cache=cache):
                raise InvalidArgument(f"share_sigma {proposed!r} is too small: {honest} honest shares of it do not make "
                                      f"the release ({epsilon}, {delta})-DP (propose 0 and each site calibrates its share)")
            return proposed
        finally:
            self._calibrations.save()

    # ------------------------------------------------------------------ step 2: masked release
    def mask(self, session, *, round_id: bytes, advertisements, follow_up: str = "") -> MaskedRelease:
        """The masked noisy counts, given every site's signed round key: the release's budget is held
        (ResourceExhausted, nothing held, when it does not fit), nothing is charged yet.

        With a ``next_round`` advertised, the next round's budget is held too (``MaskedRelease.follow_up_id``);
        ``follow_up``: the id of that hold, given to the next round's mask, which takes it over (InvalidArgument
        when this round's events are not the ones it holds)."""
        r = self._rounds.get(session, round_id)
        keys = check_advertisements(self.site, r, list(advertisements))
        transcript = round_transcript(r.advertisement.round_id, r.digest, keys)
        with r.lock:
            if r.masked is not None:
                if transcript != r.transcript:
                    raise PermissionDenied("secagg: this round was already masked for another set of keys; a round's "
                                           "keys are fixed once (start a new round)")
                return r.masked
            data, site = session.data, self.site
            # Hold the budget (all or nothing: the charge at unmask comes only once every site holds its own).
            held = site.ledger.reserve(r.key, dataset=data.dataset, analyst=session.analyst, events=self._events(r),
                                       epsilon=r.request["epsilon"], delta=r.request["delta"],
                                       fingerprint=data.fingerprint, policy=site.policy, follow_up=r.follow_up,
                                       takes_over=str(follow_up), session_id=session.session_id)
            # The same request over the same sites gets the same noisy counts (release once).
            payload = site.ledger.recorded(r.key, data.fingerprint)
            payload = self.draw(r, data) if payload is None else payload
            seed = secrets.token_bytes(32)
            with analyst_input("advertisements"):  # a key that is no X25519 point: refused, nothing kept
                masked = mask_vector(np.frombuffer(payload, dtype=np.int64), site=site.config.name,
                                     private=r.private, keys=keys, transcript=transcript, self_seed=seed)
            digest, commitment = masked_digest(masked), seed_commitment(transcript, seed)
            signature = site.signer.sign_message(receipt_message(site.config.name, transcript, digest, commitment))
            r.transcript, r.payload, r.self_seed, r.keys = transcript, payload, seed, keys
            r.masked = MaskedRelease(masked, Receipt(site.config.name, digest, commitment, signature),
                                     held.reservation_id, held.follow_up_id)
            return r.masked

    @staticmethod
    def draw(r: Round, data) -> bytes:
        """The round's noisy vector of the session's ``data``, freshly drawn (before masking): its counts (a survival
        round's ``K x 2 x J`` cells, else the histogram's, with score sums when asked) plus this site's discrete
        Gaussian share of the round's parameter."""
        if r.survival is not None:
            return encode_survival_release(draw_survival(r.survival, data.times, data.labels, data.scores,
                                                         np.random.default_rng(), sample_discrete_gaussian))
        return draw_histogram(r.plan, data.scores, data.labels, np.random.default_rng())

    def _events(self, r: Round) -> tuple:
        """What the ledger charges: the sum of the shares no coalition this site's policy accepts can know, of
        the counts and (with score sums) of the sums."""
        return self._charged_events(fewest_survivors(r.request), r.request["share_sigma"], r.plan.sums_sigma)

    def _charged_events(self, n_sites: int, sigma: float, sums_sigma: float) -> tuple:
        """The sum of ``n_sites`` shares less this site's policy's coalition: of the counts (share ``sigma``) and,
        when ``sums_sigma`` is not 0, of the score sums."""
        honest = honest_shares(n_sites, self.site.policy.secagg_colluders)
        sums = (DiscreteGaussianSum(sums_sigma, honest, SUMS_RESOLUTION),) if sums_sigma else ()
        return (DiscreteGaussianSum(sigma, honest), *sums)

    # ------------------------------------------------------------------ step 3 (rounds with dropouts): confirm
    def confirm(self, session, *, round_id: bytes, receipts) -> bytes:
        """Sign the round's surviving sites (those whose receipts the analyst relays, at least the round's fewest),
        once per round: a site never confirms two sets, so the analyst cannot show one site a set that includes it
        (to get its self seed) and its peers a set without it (to get their pairwise seeds with it)."""
        r = self._rounds.get(session, round_id)
        with r.lock:
            if r.masked is None:
                raise FailedPrecondition("secagg: this site has not masked its counts in this round yet")
            if not r.request.get("dropouts"):
                raise FailedPrecondition("secagg: this round tolerates no dropout; it is unmasked with every site's "
                                         "receipt, without confirmation")
            survivors = check_receipts(self.site, r, list(receipts), survivors=True)
            if r.survivors is not None and r.survivors != tuple(survivors):
                raise PermissionDenied(f"secagg: this site confirmed the survivors {list(r.survivors)} in this round; "
                                       "a site confirms one set of survivors per round (start a new round)")
            if r.survivors is None:
                r.survivors = tuple(survivors)
                r.confirmation = self.site.signer.sign_message(
                    survivors_message(self.site.config.name, r.transcript, survivors))
            return r.confirmation

    # ------------------------------------------------------------------ step 3: unmask
    def unmask(self, session, *, round_id: bytes, receipts, confirmations=()) -> Unmasked:
        """Charge the release and reveal the self seed, given every site's signed receipt of this round (in a round
        with dropouts: every survivor's receipt and its signed confirmation of the same survivors, and then the
        pairwise seeds with the sites that dropped out are revealed too)."""
        confirmations = list(confirmations)
        if len({site for site, _ in confirmations}) != len(confirmations):
            raise InvalidArgument("confirmations must come from distinct sites")
        r = self._rounds.get(session, round_id)
        with r.lock:
            if r.masked is None:
                raise FailedPrecondition("secagg: this site has not masked its counts in this round yet")
            if r.unmasked is not None:
                return r.unmasked
            if r.request.get("dropouts"):
                survivors = check_confirmed(self.site, r, list(receipts), dict(confirmations))
            else:
                check_receipts(self.site, r, list(receipts))
                survivors = {}
            site, data = self.site, session.data
            release, charged = site.ledger.release(
                r.key, dataset=data.dataset, analyst=session.analyst, events=self._events(r),
                epsilon=r.request["epsilon"], delta=r.request["delta"], rule="secagg", fingerprint=data.fingerprint,
                policy=site.policy, make=lambda _seed: (r.payload, 0, 0), store=True,
                reservation=r.masked.reservation_id)
            if release.payload != r.payload:
                raise FailedPrecondition("secagg: another round over the same request and sites was completed first "
                                         "with other noise; this round is aborted (nothing revealed), start a new one")
            spent = site.ledger.budget(data.key[0], site.policy).epsilon_spent
            me = site.config.name
            dropped = [v for v in r.request["sites"] if survivors and v not in survivors]
            pairs = tuple((v, pair_seed(r.private, me, v, r.keys[v], r.transcript)) for v in dropped)
            r.unmasked = Unmasked(r.self_seed, release.release_id, charged, spent,
                                  honest_shares(fewest_survivors(r.request), site.policy.secagg_colluders), pairs)
            return r.unmasked
