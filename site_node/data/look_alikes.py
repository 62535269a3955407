"""The check ``serve`` makes before it creates any state: no two entries that look like the same patients get
privacy budgets of their own unless their populations are declared."""

from __future__ import annotations

from ..config import ConfigError, SiteConfig
from .populations import candidates, suspected_shared_patients
from .table_reader import summaries_in_helper

__all__ = ["require_declared_populations"]


def require_declared_populations(config: SiteConfig) -> None:
    """Refuse (``ConfigError``) a config whose entries look like the same patients without a declared population.

    What ``serve`` checks before it makes any state: :func:`suspected_shared_patients` on the sources and on the
    tables of every entry that could be flagged (read in a helper process, so pandas never stays in the daemon; one
    that cannot be read is left to its first request), as ``dsroc-site check`` does. Otherwise each look-alike entry
    would get a full privacy budget of its own.
    """
    summaries = summaries_in_helper([config.datasets[name] for name in candidates(config)])
    notes = suspected_shared_patients(config, summaries=summaries)
    if notes:
        raise ConfigError(f"{config.source or '<config>'}: datasets: " + "; ".join(notes))
