"""The simulation grid: l2-sensitivity x epsilon x delta of the Gaussian mechanism (or epsilon x delta of the histogram
protocol's discrete Laplace), plus the noise-free setting."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from dsroc import analytic_gaussian_sigma
from dsroc.histogram.stages import laplace_release_scales

__all__ = ["Setting", "SENSITIVITIES", "EPSILONS", "DELTAS", "NOISE_FREE", "HISTOGRAM", "all_settings", "select_settings"]

SENSITIVITIES = (0.01, 0.1, 0.2, 0.3, 0.4)
EPSILONS = (0.1, 0.5, 1.0, 5.0, 10.0)
DELTAS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
NOISE_FREE = "noise-free"
HISTOGRAM = "histogram"  # the mode whose settings are (epsilon, delta) of a count release of sensitivity 1


@dataclass(frozen=True)
class Setting:
    """One privacy setting; ``sensitivity == 0`` marks the noise-free setting (tau = 0).

    ``tau`` is the noise standard deviation of the analytic Gaussian mechanism (Balle and Wang 2018), or
    with ``discrete`` the per-site scale of the histogram protocol's discrete Laplace on the counts of a
    counts-only release at ``epsilon`` (sensitivity 1: one patient is one count; ``delta`` unused),
    :func:`dsroc.histogram.stages.laplace_release_scales`.
    """

    sensitivity: float
    epsilon: float
    delta: float
    discrete: bool = False

    @property
    def noise_free(self) -> bool:
        """True for the setting without noise."""
        return self.sensitivity == 0.0

    @property
    def tau(self) -> float:
        """Noise standard deviation: 0 without noise, else ``analytic_gaussian_sigma(epsilon, delta, sensitivity)``."""
        if self.noise_free:
            return 0.0
        if self.discrete:
            return laplace_release_scales(self.epsilon, score_sums=False)[0]
        return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)

    @property
    def name(self) -> str:
        """Stable identifier, used in file names and tables."""
        if self.noise_free:
            return NOISE_FREE
        if self.discrete:
            return f"eps={self.epsilon:g}_delta={self.delta:g}"
        return f"sens={self.sensitivity:g}_eps={self.epsilon:g}_delta={self.delta:g}"


def all_settings(mode: str = "paper") -> list[Setting]:
    """The settings of a mode, noise-free first.

    ``"paper"`` and ``"protocol"``: the paper's 126 (sensitivity x epsilon x delta). ``"histogram"``: the
    26 of the histogram protocol (epsilon x delta; a count has sensitivity 1).
    """
    if mode == HISTOGRAM:
        return [Setting(0.0, 0.0, 0.0, True)] + [Setting(1.0, e, d, True) for e, d in product(EPSILONS, DELTAS)]
    noisy = [Setting(s, e, d) for s, e, d in product(SENSITIVITIES, EPSILONS, DELTAS)]
    return [Setting(0.0, 0.0, 0.0)] + noisy


def select_settings(names=None, *, mode: str = "paper") -> list[Setting]:
    """Settings by name (see :attr:`Setting.name`), in grid order; all of the mode's when ``names`` is None.

    A name may also be a bare sensitivity such as ``"sens=0.1"``, selecting its 25 settings.
    """
    settings = all_settings(mode)
    if not names:
        return settings
    wanted = []
    for name in names:
        hits = [s for s in settings if s.name == name or (name.startswith("sens=") and s.name.startswith(name + "_"))]
        if not hits:
            raise ValueError(
                f"unknown setting {name!r} in {mode} mode; use 'noise-free'"
                + (", 'sens=<D>'" if mode != HISTOGRAM else "") + f" or a full name such as '{settings[1].name}'"
            )
        wanted.extend(hits)
    return [s for s in settings if s in set(wanted)]
