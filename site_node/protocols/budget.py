"""How many more releases of a planned request fit a population's budget, by the ledger's accountant, for every protocol."""

from __future__ import annotations

from dataclasses import dataclass

from dsroc import analytic_gaussian_sigma
from dsroc.privacy.accounting import Gaussian

from ..errors import InvalidArgument, ResourceExhausted, SiteError
from ..rules.guard import analyst_input, check_release_parameters
from .base import require_protocol
from .boyd import boyd_events, check_count_share
from .histogram.release import plan_histogram
from .histogram.survival import plan_survival

__all__ = ["MAX_QUERIES", "ReleaseQuery", "ReleasesLeft", "check_query_count", "query_events", "releases_left"]

PROTOCOLS = ("paper", "histogram", "boyd", "survival")
#: Release queries one Budget or Describe call may ask (a validation asks one per protocol): each costs up to a
#: calibration, and a single 16 MiB call of them took ~80 s of CPU.
MAX_QUERIES = 16


def check_query_count(count: int) -> None:
    """InvalidArgument when a call asks more than :data:`MAX_QUERIES` release queries."""
    if count > MAX_QUERIES:
        raise InvalidArgument(f"queries: a call may ask at most {MAX_QUERIES} release queries, got {count}")


@dataclass(frozen=True)
class ReleaseQuery:
    """A release an analyst plans (``dsroc.v1.ReleaseQuery``)."""

    protocol: str
    epsilon: float
    delta: float
    scalars: tuple[str, ...] = ()
    count_share: float = 0.0
    score_sums: bool = False  # histogram: with the per-bin score sums; survival: with the risk sums


@dataclass(frozen=True)
class ReleasesLeft:
    """How many more releases of ``query`` fit; ``refused`` says why none would be made whatever the budget."""

    query: ReleaseQuery
    releases: int
    at_least: bool = False
    refused: str = ""


def query_events(site, query: ReleaseQuery) -> tuple:
    """The ledger events one release of ``query`` would be charged: the same calibration as the release itself.

    Raises the site's refusal (a :class:`site_node.errors.SiteError`) when the policy refuses the request.
    """
    if query.protocol not in PROTOCOLS:
        raise InvalidArgument(f"protocol must be one of {list(PROTOCOLS)}, got {query.protocol!r}")
    # A survival release is the histogram protocol's (it serves the call only where it serves histograms).
    require_protocol(site.policy, "histogram" if query.protocol == "survival" else query.protocol)
    epsilon, delta = check_release_parameters(site.policy, query.epsilon, query.delta)
    policy = site.policy
    if query.protocol == "paper":
        # The Gaussian-DP cost of a score release is 1 / sigma at sensitivity 1, whatever the sensitivity.
        with analyst_input("epsilon, delta"):
            return (Gaussian(analytic_gaussian_sigma(epsilon, delta, 1.0), 1.0),)
    if query.protocol == "boyd":
        return boyd_events(epsilon, delta, check_count_share(query.count_share))
    if query.protocol == "survival":
        # The events of a survival release depend on its epsilon and risk sums, not on its grids: planned on the
        # policy's first time edge and first score grid, which every survival policy allows.
        edges = policy.survival_time_edges[:1]
        return plan_survival(policy, (0.0, 1.0), time_column="", epsilon=epsilon, delta=delta, time_edges=edges,
                             n_bins=policy.histogram_bins[0], spacing=policy.histogram_spacings[0], edges=(),
                             risk_sums=query.score_sums, interval=site.ledger_interval).events
    # The events of a histogram release depend on (epsilon, delta) and its scalars, not on its grid.
    with analyst_input("epsilon, delta"):
        plan = plan_histogram(policy, (0.0, 1.0), epsilon=epsilon, delta=delta, n_bins=policy.histogram_bins[0],
                              spacing=policy.histogram_spacings[0], scalars=query.scalars,
                              interval=site.ledger_interval, score_sums=query.score_sums)
    return plan.events


def releases_left(site, population: str, queries, *, analyst: str = "") -> tuple[ReleasesLeft, ...]:
    """For each query, how many more such releases the population's ledger would accept (holds counted as spent).

    A query's events are calibrated once and kept (``site.calibrations``); a new calibration counts against
    ``analyst``'s allowance, and the call is refused (ResourceExhausted) when it is used up.
    """
    check_query_count(len(queries))
    out = []
    for query in queries:
        try:
            events = site.calibrations.get(analyst, ("release query", query), lambda: query_events(site, query),
                                           what="release query")
        except ResourceExhausted:
            raise
        except SiteError as exc:
            out.append(ReleasesLeft(query, 0, refused=str(exc)))
            continue
        count, stopped = site.ledger.releases_left(population, site.policy, events)
        out.append(ReleasesLeft(query, count, stopped))
    return tuple(out)
