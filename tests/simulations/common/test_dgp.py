"""The data-generating process: n range, prevalence window, AUC spread, streams that depend on (seed, rep) only."""

import numpy as np
import pytest

from dsroc import empirical_auc
from simulations.common.dgp import N_SITES, generate_batch, generate_replication
from simulations.common.settings import all_settings, select_settings


@pytest.fixture(scope="module")
def replications():
    return [generate_replication(3, r) for r in range(300)]


def test_sizes_prevalence_and_sites(replications):
    n = np.array([d.scores.size for d in replications])
    assert n.min() >= 100 and n.max() <= 2500
    assert n.std() > 500  # spread over the whole range, not a constant
    for d in replications:
        assert 0.1 <= d.labels.mean() <= 0.9
        assert ((d.scores >= 0) & (d.scores <= 1)).all()
        sizes = np.bincount(d.sites, minlength=N_SITES)
        assert sizes.max() - sizes.min() <= 1  # five near-equal parts
        assert d.noise.size == d.scores.size


def test_relabelling_matches_gamma(replications):
    # Labels differ from 1(s > 0.5) only inside the redrawn subset, about half of it: E = gamma n / 2.
    flipped = np.array([np.mean(d.labels != (d.scores > 0.5)) for d in replications])
    gamma = np.array([d.gamma for d in replications])
    assert np.all(flipped <= gamma + 1e-12)
    assert np.corrcoef(flipped, gamma / 2)[0, 1] > 0.95


def test_auc_spreads_over_half_to_one(replications):
    auc = np.array([empirical_auc(d.scores, d.labels) for d in replications])
    assert auc.min() < 0.56 and auc.max() > 0.97
    # Roughly uniform on (0.5, 1]: every tenth of the range holds some replications.
    counts = np.histogram(auc, bins=np.linspace(0.5, 1.0, 11))[0]
    assert counts.min() >= 10


def test_stream_depends_on_seed_and_rep_only():
    a, b = generate_replication(5, 17), generate_replication(5, 17)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(generate_replication(6, 17).scores[:50], a.scores[:50])
    batch = generate_batch(5, [16, 17])
    np.testing.assert_array_equal(batch.scores[batch.groups == 1], a.scores)
    np.testing.assert_array_equal(batch.noise[batch.groups == 1], a.noise)
    assert batch.n1[1] == a.labels.sum()


def test_bad_seed_and_rep():
    with pytest.raises(ValueError, match="seed"):
        generate_replication(-1, 0)
    with pytest.raises(ValueError, match="rep"):
        generate_replication(1, 1.5)


def test_settings_grid():
    settings = all_settings()
    assert len(settings) == 126 and settings[0].noise_free and settings[0].tau == 0.0
    assert len({s.name for s in settings}) == 126
    assert len(select_settings(["sens=0.1"])) == 25
    one = select_settings(["sens=0.4_eps=10_delta=0.1", "noise-free"])
    assert [s.name for s in one] == ["noise-free", "sens=0.4_eps=10_delta=0.1"]
    # tau from the analytic Gaussian mechanism; SPEC test vector (1, 1, 1e-5 -> 3.7306316348) scales with sensitivity.
    assert select_settings(["sens=0.1_eps=1_delta=1e-05"])[0].tau == pytest.approx(0.37306316348, rel=1e-9)
    with pytest.raises(ValueError, match="unknown setting"):
        select_settings(["sens=0.7"])
