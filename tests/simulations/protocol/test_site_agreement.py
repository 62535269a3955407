"""Protocol mode computes, per site, exactly what the site daemon's ``Site`` returns for the same uploads."""

import numpy as np
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsroc import RocGlmParts, SurvivorFunction, mean_parts, rocglm_grid, sq_dev_parts
from dsroc.v1 import site_pb2 as pb
from simulations.common.dgp import generate_replication
from simulations.common.settings import select_settings
from site_node.config import load_config
from site_node.store.ledger import SqliteLedger
from site_node.data.scores import ScoreSpec
from site_node.security.signing import public_key_text, sign_release, values_digest
from site_node.protocols.paper.protocol import NEGATIVES, POSITIVES, PaperProtocol
from site_node.site import Site
from site_node.testing import write_site_config


PEER_KEYS = {f"p{k}": Ed25519PrivateKey.generate() for k in range(5)}  # the five sites whose releases are pooled


def _segments(released, score_class):
    """The pooled releases as signed segments (a site accepts a survivor function only as such a union)."""
    out = []
    for k, r in enumerate(released):
        values = np.asarray(r[score_class - 1], dtype="<f8")
        fields = {"site": f"p{k}", "population": "test", "dataset": "test", "source": "column:pred", "outcome": "y",
                  "release_id": f"r{k}", "score_class": score_class, "epsilon": 5.0, "delta": 0.01, "sensitivity": 0.2,
                  "n": values.size, "values_sha256": values_digest(values)}
        out.append(pb.ReleaseInfo(**fields, signature=sign_release(PEER_KEYS[f"p{k}"], fields)))
    return out


def _site(tmp_path, scores, labels):
    config = write_site_config(
        tmp_path, name="sim", frames={"test": pd.DataFrame({"pred": scores, "y": labels})}, data_format="parquet",
        policy={"protocols": ["paper"], "max_delta": 0.1, "budget_epsilon": 20.0, "budget_delta": 0.5},
        analysts={"alice": "t"}, peers={name: public_key_text(key) for name, key in PEER_KEYS.items()})
    return Site(load_config(config), SqliteLedger.in_memory())


def test_protocol_site_step_equals_site_node(tmp_path, protocol_reference):
    seed, rep = 3, 1
    setting = select_settings(["sens=0.2_eps=5_delta=0.01"])[0]
    d = generate_replication(seed, rep)
    released = []
    for k in range(5):
        m = d.sites == k
        released.append(protocol_reference.release_scores(d.scores[m & (d.labels == 0)], d.scores[m & (d.labels == 1)], setting.tau, seed, rep, k))
    pooled0 = np.concatenate([r[0] for r in released])
    pooled1 = np.concatenate([r[1] for r in released])
    k = 2  # any one site
    m = d.sites == k
    site = _site(tmp_path, d.scores[m], d.labels[m])
    session = site.open_session("alice", "test", "y", ScoreSpec(column="pred"))
    paper = PaperProtocol(site)
    paper.upload_survivor(session, NEGATIVES, pooled0, declared_n=pooled0.size, segments=_segments(released, NEGATIVES))
    paper.upload_survivor(session, POSITIVES, pooled1, declared_n=pooled1.size, segments=_segments(released, POSITIVES))

    # What protocol mode computes for this site
    s0, s1 = d.scores[m & (d.labels == 0)], d.scores[m & (d.labels == 1)]
    pv0 = SurvivorFunction(pooled0)(s1, ties="mid")
    pv1 = SurvivorFunction(pooled1)(s0, ties="mid")
    theta = np.array([0.7, 1.1])
    ours = RocGlmParts.from_placements(pv0, rocglm_grid()).evaluate(theta)
    theirs, _, n_points = paper.rocglm_parts(session, theta, pb.GridSpec(n_points=30))
    assert n_points == 28
    np.testing.assert_allclose(theirs.score, ours.score, rtol=1e-12)
    np.testing.assert_allclose(theirs.information, ours.information, rtol=1e-12)
    assert theirs.deviance == pytest.approx(ours.deviance, rel=1e-12)

    first = paper.placement_moments(session, None)
    assert first.pv0 == mean_parts(pv0) and first.pv1 == mean_parts(pv1)
    second = paper.placement_moments(session, (0.3, 0.6))
    assert second.ssd_pv0 == pytest.approx(sq_dev_parts(pv0, 0.3), rel=1e-12)
    assert second.ssd_pv1 == pytest.approx(sq_dev_parts(pv1, 0.6), rel=1e-12)
