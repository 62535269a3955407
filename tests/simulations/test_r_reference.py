"""The Python side of the R-reference benchmark (benchmarks/r_reference.py): export round trip, exact grid counts,
and the error naming the apt-get command when R is missing. None of these needs R."""

from fractions import Fraction

import numpy as np
import pytest

from benchmarks.r_reference import APT_COMMAND, check_r, count_checks, export_replications, main
from dsroc import analytic_gaussian_sigma
from simulations.common.dgp import Batch, generate_replication
from simulations.common.settings import Setting, select_settings


def test_export_round_trip(tmp_path):
    settings = select_settings(["noise-free", "sens=0.1_eps=0.5_delta=0.001", "sens=0.4_eps=10_delta=1e-05"])
    reps = [3, 8, 11]
    export_replications(tmp_path, seed=5, reps=reps, settings=settings)
    sizes = np.fromfile(tmp_path / "sizes.i32", dtype="<i4")
    scores = np.fromfile(tmp_path / "scores.f64", dtype="<f8")
    labels = np.fromfile(tmp_path / "labels.i32", dtype="<i4")
    noise = np.fromfile(tmp_path / "noise.f64", dtype="<f8")
    taus = np.fromfile(tmp_path / "taus.f64", dtype="<f8")
    singles = [generate_replication(5, r) for r in reps]
    assert sizes.tolist() == [d.scores.size for d in singles]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    assert scores.size == labels.size == noise.size == bounds[-1]
    for d, lo, hi in zip(singles, bounds[:-1], bounds[1:]):
        np.testing.assert_array_equal(scores[lo:hi], d.scores)  # bit-exact: R reads the same doubles
        np.testing.assert_array_equal(labels[lo:hi], d.labels)
        np.testing.assert_array_equal(noise[lo:hi], d.noise)
    assert taus[0] == 0.0
    assert taus[1:].tolist() == [analytic_gaussian_sigma(0.5, 1e-3, 0.1), analytic_gaussian_sigma(10.0, 1e-5, 0.4)]


def _batch(neg, pos, noise_neg, noise_pos) -> Batch:
    scores = np.concatenate([neg, pos])
    labels = np.r_[np.zeros(len(neg), np.int8), np.ones(len(pos), np.int8)]
    return Batch(reps=np.array([0]), scores=scores, labels=labels, sites=np.zeros(scores.size, np.int8),
                 noise=np.concatenate([noise_neg, noise_pos]), groups=np.zeros(scores.size, np.int64),
                 n=np.array([scores.size]), n1=np.array([len(pos)]), auc_population=np.array([np.nan]))


def test_grid_counts_exact_at_ties():
    # n0 = 58 (a multiple of 29): a positive above exactly 2j negatives has PV0 = (58 - 2j) / 58, on the grid.
    rng = np.random.default_rng(4)
    neg = np.sort(rng.random(58))
    pos = np.r_[neg[1::2][:20], rng.random(30)]  # 20 positives tied to grid points, 30 anywhere
    batch = _batch(neg, pos, rng.standard_normal(58), rng.standard_normal(50))
    settings = [Setting(0.0, 0.0, 0.0), Setting(0.1, 1.0, 1e-3)]
    checks = count_checks(batch, settings)
    tau = analytic_gaussian_sigma(1.0, 1e-3, 0.1)
    for j, t in enumerate((0.0, tau)):
        noisy = np.clip(batch.scores + t * batch.noise, 0.0, 1.0) if t else batch.scores
        n0, s0, s1 = 58, noisy[:58], noisy[58:]
        pv0 = [Fraction(int((s0 > s).sum()), n0) for s in s1]  # brute force, exact rationals
        brute = [sum(p <= Fraction(i, 29) for p in pv0) for i in range(1, 29)]
        assert checks["exact"][0, j].tolist() == brute
        assert checks["dsroc"][0, j].tolist() == brute
    assert checks["ties"][0, 0]  # noise-free: the constructed ties


def test_missing_rscript_names_the_apt_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no Rscript
    with pytest.raises(RuntimeError, match="Rscript not found") as info:
        check_r()
    assert APT_COMMAND in str(info.value)
    with pytest.raises(SystemExit) as exit_info:
        main(["--reps", "1"])
    assert exit_info.value.code == 2
    assert f"`{APT_COMMAND}`" in capsys.readouterr().err


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--reps", "0"])
    assert "--reps must be a positive integer" in capsys.readouterr().err
