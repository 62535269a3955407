"""What every protocol module at the site shares: the site's services and the check that the site serves it."""

from __future__ import annotations

from ..config import Policy
from ..errors import FailedPrecondition
from ..store.ledger import Ledger

__all__ = ["SiteProtocol", "require_protocol"]


def require_protocol(policy: Policy, protocol: str) -> None:
    """Refuse a call of a protocol the site does not serve (FAILED_PRECONDITION naming the served ones)."""
    if protocol not in policy.protocols:
        raise FailedPrecondition(
            f"this site does not serve the {protocol!r} protocol; it serves {list(policy.protocols)} "
            "(site policy: protocols)"
        )


class SiteProtocol:
    """One protocol's calls, answered on the site's shared services.

    Policy, ledger, disclosure auditor, datasets, sessions and signer belong to the site
    (:class:`site_node.site.Site`) and are never re-implemented per protocol; a protocol module only
    says what its calls compute and which rules they pass first.

    Parameters
    ----------
    site : site_node.site.Site
        The site whose services the calls use.
    """

    name: str = ""  # as in the policy's ``protocols`` list

    def __init__(self, site):
        self.site = site

    @property
    def policy(self) -> Policy:
        """The site's privacy policy."""
        return self.site.policy

    @property
    def ledger(self) -> Ledger:
        """The site's privacy ledger."""
        return self.site.ledger

    def require(self) -> None:
        """Refuse (FAILED_PRECONDITION) if the site's policy does not list this protocol."""
        require_protocol(self.policy, self.name)
