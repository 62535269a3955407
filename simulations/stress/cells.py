"""The stress study's cells: its factors, the centre, the default fractional and the full factorial grids, paper cells."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from ..common.dgp import N_SITES
from ..common.settings import Setting
from .designs import SHAPES, Design

__all__ = ["PREVALENCES", "AUCS", "NS", "SITES", "EPSILONS", "DELTA", "CENTRE", "PAPER_NS", "StressCell", "PaperCell",
           "default_cells", "full_cells", "paper_cells"]

PREVALENCES = (0.02, 0.1, 0.3, 0.5)
AUCS = (0.6, 0.76, 0.9, 0.99)
NS = (250, 1_000, 10_000, 100_000)
SITES = (2, 5, 50)
EPSILONS = (0.5, 1.0, 5.0)
DELTA = 1e-5
CENTRE = {"shape": "binormal", "prevalence": 0.3, "auc": 0.76, "n": 10_000, "sites": 5, "epsilon": 1.0}
PAPER_NS = (1_000, 10_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class StressCell:
    """A histogram-protocol cell: a design, ``n`` patients over ``sites`` sites, each release at (epsilon, delta)."""

    design: Design
    n: int
    sites: int
    epsilon: float
    delta: float = DELTA

    @property
    def name(self) -> str:
        return f"{self.design.name}_n={self.n}_K={self.sites}_eps={self.epsilon:g}"


@dataclass(frozen=True)
class PaperCell:
    """A paper-protocol cell: a design and ``n`` over five sites at one privacy ``setting``."""

    design: Design
    n: int
    setting: Setting
    sites: int = field(default=N_SITES, init=False)

    @property
    def name(self) -> str:
        return f"{self.design.name}_n={self.n}_K={self.sites}_paper_{self.setting.name}"


def _cell(shape=None, prevalence=None, auc=None, n=None, sites=None, epsilon=None) -> StressCell:
    """The centre with the given factors changed."""
    f = dict(CENTRE)
    f.update({k: v for k, v in dict(shape=shape, prevalence=prevalence, auc=auc, n=n, sites=sites,
                                    epsilon=epsilon).items() if v is not None})
    return StressCell(Design(f["shape"], f["prevalence"], f["auc"]), f["n"], f["sites"], f["epsilon"])


def default_cells() -> list[StressCell]:
    """The default fractional design around :data:`CENTRE` (57 cells): shape x prevalence, shape x AUC,
    shape x n, prevalence x n (binormal) and sites x epsilon (the centre), the other factors at the centre."""
    cells = [_cell(shape=s, prevalence=p) for s, p in product(SHAPES, PREVALENCES)]
    cells += [_cell(shape=s, auc=a) for s, a in product(SHAPES, AUCS)]
    cells += [_cell(shape=s, n=n) for s, n in product(SHAPES, NS)]
    cells += [_cell(prevalence=p, n=n) for p, n in product(PREVALENCES, NS)]
    cells += [_cell(sites=k, epsilon=e) for k, e in product(SITES, EPSILONS)]
    return list(dict.fromkeys(cells))


def full_cells() -> list[StressCell]:
    """The full factorial: 4 shapes x 4 prevalences x 4 AUCs x 4 n x 3 site counts x 3 epsilons (2 304 cells)."""
    return [StressCell(Design(s, p, a), n, k, e)
            for s, p, a, n, k, e in product(SHAPES, PREVALENCES, AUCS, NS, SITES, EPSILONS)]


def paper_cells(settings, ns=PAPER_NS) -> list[PaperCell]:
    """Paper-protocol cells: binormal and skewed designs at the centre's prevalence and AUC, ``ns``, ``settings``."""
    return [PaperCell(Design(s, CENTRE["prevalence"], CENTRE["auc"]), n, st)
            for s, n, st in product(("binormal", "skewed"), ns, settings)]
