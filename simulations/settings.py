"""The simulation grid: l2-sensitivity x epsilon x delta of the Gaussian mechanism, plus the noise-free setting."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from dsroc import analytic_gaussian_sigma

__all__ = ["Setting", "SENSITIVITIES", "EPSILONS", "DELTAS", "NOISE_FREE", "all_settings", "select_settings"]

SENSITIVITIES = (0.01, 0.1, 0.2, 0.3, 0.4)
EPSILONS = (0.1, 0.5, 1.0, 5.0, 10.0)
DELTAS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
NOISE_FREE = "noise-free"


@dataclass(frozen=True)
class Setting:
    """One privacy setting; ``sensitivity == 0`` marks the noise-free setting (tau = 0).

    ``tau`` is the noise standard deviation of the analytic Gaussian mechanism (Balle and Wang 2018).
    """

    sensitivity: float
    epsilon: float
    delta: float

    @property
    def noise_free(self) -> bool:
        """True for the setting without noise."""
        return self.sensitivity == 0.0

    @property
    def tau(self) -> float:
        """Noise standard deviation: 0 without noise, else ``analytic_gaussian_sigma(epsilon, delta, sensitivity)``."""
        if self.noise_free:
            return 0.0
        return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)

    @property
    def name(self) -> str:
        """Stable identifier, used in file names and tables."""
        if self.noise_free:
            return NOISE_FREE
        return f"sens={self.sensitivity:g}_eps={self.epsilon:g}_delta={self.delta:g}"


def all_settings() -> list[Setting]:
    """The 126 settings of the paper: noise-free first, then sensitivity x epsilon x delta."""
    noisy = [Setting(s, e, d) for s, e, d in product(SENSITIVITIES, EPSILONS, DELTAS)]
    return [Setting(0.0, 0.0, 0.0)] + noisy


def select_settings(names=None) -> list[Setting]:
    """Settings by name (see :attr:`Setting.name`), in grid order; all of them when ``names`` is None.

    A name may also be a bare sensitivity such as ``"sens=0.1"``, selecting its 25 settings.
    """
    settings = all_settings()
    if not names:
        return settings
    wanted = []
    for name in names:
        hits = [s for s in settings if s.name == name or (name.startswith("sens=") and s.name.startswith(name + "_"))]
        if not hits:
            raise ValueError(
                f"unknown setting {name!r}; use 'noise-free', 'sens=<D>' or a full name such as "
                f"'{settings[1].name}'"
            )
        wanted.extend(hits)
    return [s for s in settings if s in set(wanted)]
