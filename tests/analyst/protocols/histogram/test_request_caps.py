"""A site's per-release caps apply to the analyst's request as a whole: the quantile grid's two stages are held
together and capped as one release at their sum, the number the analyst asked for (quoted in the refusal), through
real TLS daemons; nothing is held or charged by a refused request."""

from __future__ import annotations

import contextlib
import sqlite3
import time

import grpc
import pytest

from analyst.connection import SiteError
from site_node.testing import running_server


def _ledger(config) -> tuple[int, int]:
    """(releases, unexpired holds) of a site's ledger file."""
    with contextlib.closing(sqlite3.connect(config.parent / "state" / "ledger.sqlite")) as db:
        releases = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        holds = db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]
    return releases, holds


@pytest.fixture(scope="module")
def capped(tmp_path_factory, pki, helpers):
    """Two sites whose policy allows epsilon 10 per release (the test policy's max_epsilon)."""
    root = tmp_path_factory.mktemp("caps")
    frames = helpers.site_frames(seed=5)[:2]
    paths = [helpers.write_site(root / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
    assert all("max_epsilon = 10.0" in p.read_text() for p in paths)
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(running_server(p)).bound_address for p in paths], paths


@pytest.mark.parametrize("epsilon, quoted", [(12.5, "epsilon 12.5 "), (20.0, "epsilon 20 ")])
def test_a_two_stage_request_above_the_cap_is_refused_with_the_analysts_number(capped, pki, helpers, epsilon, quoted):
    addresses, paths = capped
    before = [_ledger(p) for p in paths]
    with helpers.federation(addresses, pki) as fed:
        with pytest.raises(SiteError) as err:  # each stage alone (0.2 and 0.8 of it for 12.5) would be within 10
            fed.validate("test", "y", score="pred", epsilon=epsilon, delta=1e-5)
    message = err.value.message
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert quoted in message and "above this site's limit per release (10)" in message
    assert "15.99" not in message and "one request" in message
    assert "nothing was released or charged at any site" in message
    assert [_ledger(p) for p in paths] == before


def test_a_request_at_the_cap_is_accepted_and_composes_to_it(capped, pki, helpers):
    addresses, paths = capped
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=10.0, delta=1e-5)
    # the two stages compose to the request: the split is charged on the ledger's grid rounded down, never above it
    assert all(p.releases == 2 and 9.99 < p.epsilon <= 10.0 + 1e-9 for p in res.privacy.values())
    assert [_ledger(p)[0] for p in paths] == [2, 2]
