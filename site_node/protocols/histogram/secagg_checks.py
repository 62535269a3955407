"""Checks of a secagg round's sites and of the signed messages the analyst relays: advertisements, receipts, confirmations.

Every message a site signs in a round names the round's transcript (or, for an advertisement, its id and request
digest), so a message of another round, request or site is refused here, before anything is masked or revealed.
"""

from __future__ import annotations

from dsroc.secagg import advertisement_message, receipt_message, survivors_message

from ...errors import FailedPrecondition, InvalidArgument, PermissionDenied
from .secagg_rounds import Round, fewest_survivors

__all__ = ["check_sites", "check_dropouts", "check_advertisements", "check_receipts", "check_confirmed"]


def check_sites(site, sites: list[str]) -> None:
    """Refuse a round's sites unless distinct, this site among them, at least the policy's fewest, all peers."""
    policy, signer, name = site.policy, site.signer, site.config.name
    if len(set(sites)) != len(sites):
        raise InvalidArgument(f"sites must be distinct names, got {sites}")
    if name not in sites:
        raise InvalidArgument(f"sites must include this site ({name!r}), got {sites}")
    if len(sites) < policy.secagg_min_sites:
        raise PermissionDenied(f"policy: a secagg round needs at least {policy.secagg_min_sites} sites "
                               f"(policy.secagg_min_sites), got {len(sites)}")
    unknown = [s for s in sites if not signer.knows(s)]
    if unknown:
        raise PermissionDenied(f"secagg: sites {unknown} are not peers of this site (a round's sites must be "
                               "listed with their public keys in the site config's [peers] tables)")


def check_dropouts(site, dropouts, n_sites: int, colluders: int) -> int:
    """The round's tolerated dropouts, checked: the fewest survivors must number at least the policy's
    ``secagg_min_sites`` and ``colluders + 2`` (so that no coalition of the analyst and ``colluders`` sites can
    show one honest site a set of survivors and its peers another, see :meth:`site_node.protocols.histogram.secagg.SecAggProtocol.confirm`)."""
    if isinstance(dropouts, bool) or int(dropouts) != dropouts or dropouts < 0:
        raise InvalidArgument(f"dropouts must be a non-negative integer, got {dropouts!r}")
    dropouts, least = int(dropouts), max(site.policy.secagg_min_sites, colluders + 2)
    if dropouts and n_sites - dropouts < least:
        raise PermissionDenied(f"secagg: a round of {n_sites} sites with {dropouts} dropouts keeps {n_sites - dropouts}"
                               f" sites, fewer than {least} (policy.secagg_min_sites, and colluders + 2 so that "
                               "survivor sets cannot be split around one site)")
    return dropouts


def check_advertisements(site, r: Round, advertisements) -> dict[str, bytes]:
    """Every site's round key, when the advertisements are one per site of the round, each signed for this round
    and request, this site's its own (refused otherwise)."""
    sites = r.request["sites"]
    names = [a.site for a in advertisements]
    if sorted(names) != sites:
        raise InvalidArgument(f"advertisements must be one per site of the round {sites}, got {sorted(names)}")
    keys = {}
    for a in advertisements:
        where = f"advertisements (site {a.site!r})"
        if bytes(a.round_id) != r.advertisement.round_id or a.request_sha256 != r.digest:
            raise PermissionDenied(f"secagg: {where}: made for another round or request (replayed or mixed rounds "
                                   "are refused)")
        message = advertisement_message(a.site, a.round_id, a.request_sha256, a.public_key)
        if not site.signer.verify_message(a.site, message, a.signature):
            raise PermissionDenied(f"secagg: {where}: the signature does not verify under the site's public key "
                                   "(relay each advertisement unchanged)")
        if a.site == r.advertisement.site and bytes(a.public_key) != r.advertisement.public_key:
            raise PermissionDenied(f"secagg: {where}: not this site's round key")
        keys[a.site] = bytes(a.public_key)
    return keys


def check_confirmed(site, r: Round, receipts, confirmations: dict) -> dict[str, str]:
    """The survivors this site confirmed, when ``receipts`` are theirs and every one of them signed the same set."""
    survivors = check_receipts(site, r, receipts, survivors=True)
    if r.survivors != tuple(survivors):
        raise FailedPrecondition("secagg: this site has not confirmed these survivors (SecAggConfirm first; a site "
                                 "reveals nothing for a set it did not confirm)")
    if sorted(confirmations) != list(survivors):
        raise FailedPrecondition(f"secagg: confirmations: one per survivor {list(survivors)} is needed, got "
                                 f"{sorted(confirmations)}; until every survivor confirmed no site reveals anything")
    for name, signature in confirmations.items():
        if not site.signer.verify_message(name, survivors_message(name, r.transcript, survivors), signature):
            raise PermissionDenied(f"secagg: confirmations (site {name!r}): the signature does not verify for these "
                                   "survivors of this round (relay each confirmation unchanged)")
    return survivors


def check_receipts(site, r: Round, receipts, *, survivors: bool = False) -> dict[str, str]:
    """Each receipt's masked digest by site, when every one is signed for this round and this site's is its own:
    one per site of the round, or with ``survivors`` one per survivor (distinct sites of the round, this site
    among them, at least the round's fewest)."""
    sites, names = r.request["sites"], sorted(x.site for x in receipts)
    if not survivors and names != sites:
        raise FailedPrecondition(f"secagg: the round is complete only with one receipt from every site {sites}; "
                                 "until then no site reveals its self seed (a site dropped out: start a new round)")
    if survivors and (len(set(names)) != len(names) or not set(names) <= set(sites)
                      or r.advertisement.site not in names or len(names) < fewest_survivors(r.request)):
        raise FailedPrecondition(f"secagg: receipts must come from distinct sites of the round {sites}, this site "
                                 f"among them, and at least {fewest_survivors(r.request)} of them (the round's fewest "
                                 f"survivors), got {names}")
    for x in receipts:
        message = receipt_message(x.site, r.transcript, x.masked_sha256, x.commitment)
        if not site.signer.verify_message(x.site, message, x.signature):
            raise PermissionDenied(f"secagg: receipts (site {x.site!r}): the signature does not verify for this "
                                   "round (relay each receipt unchanged; receipts of other rounds are refused)")
        if x.site == r.masked.receipt.site and (x.masked_sha256, x.commitment) != (
                r.masked.receipt.masked_sha256, r.masked.receipt.commitment):
            raise PermissionDenied("secagg: receipts: this site's receipt is not the one it signed in this round")
    return {x.site: x.masked_sha256 for x in sorted(receipts, key=lambda x: x.site)}
