"""Coverage of the paper protocol's noise-corrected AUC at fixed n on several score shapes (binormal, skewed, bimodal, the paper's)."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import integrate
from scipy.stats import gamma, norm

from ..common.binormal import generate_binormal_batch, generate_logit_batch
from .coverage import coverage_table
from ..common.dgp import Batch, generate_batch
from .pipeline import run_protocol_chunk
from ..common.settings import select_settings

__all__ = ["SHAPES", "SKEW_SHAPE", "BIMODAL_SHIFT", "BIMODAL_SD", "shape_batch", "shape_population_auc",
           "run_paper_coverage", "write_paper_coverage", "annotate_recommended"]

SHAPES = ("binormal", "skewed", "bimodal", "paper")
SKEW_SHAPE = 2.0  # skewed: logit offset (Gamma(k) - k) / sqrt(k), mean 0, SD 1, skewness 2 / sqrt(k) = 1.41
BIMODAL_SHIFT, BIMODAL_SD = 1.0, 0.8  # bimodal: logit offset +-1 (equal odds) + N(0, 0.8^2)
MAX_ELEMENTS = 2_000_000  # patients per chunk of replications (memory of one batched chunk)


def _skewed(rng: np.random.Generator, size: int) -> np.ndarray:
    return (rng.gamma(SKEW_SHAPE, 1.0, size) - SKEW_SHAPE) / np.sqrt(SKEW_SHAPE)


def _bimodal(rng: np.random.Generator, size: int) -> np.ndarray:
    return np.where(rng.random(size) < 0.5, -BIMODAL_SHIFT, BIMODAL_SHIFT) + BIMODAL_SD * rng.standard_normal(size)


@lru_cache(maxsize=None)
def shape_population_auc(shape: str) -> float:
    """Population AUC of a logit-scale design: ``P(1 + e1 > e0)`` for the shape's offsets ``e`` (the classes'
    mean logits differ by 1, :func:`simulations.common.binormal.binormal_means`)."""
    if shape == "binormal":
        return float(norm.cdf(1.0 / np.sqrt(2.0)))
    if shape == "skewed":  # P(G1 - G0 > -sqrt(k)) for G ~ Gamma(k)
        k = SKEW_SHAPE
        value, _ = integrate.quad(lambda g: gamma.pdf(g, k) * gamma.sf(g - np.sqrt(k), k), 0.0, np.inf)
        return float(value)
    if shape == "bimodal":
        a = (-BIMODAL_SHIFT, BIMODAL_SHIFT)
        return float(np.mean([norm.cdf((1.0 + a1 - a0) / (BIMODAL_SD * np.sqrt(2.0))) for a1 in a for a0 in a]))
    raise ValueError(f"shape must be one of {', '.join(SHAPES[:3])} for a population AUC in closed form, got {shape!r}")


def shape_batch(shape: str, seed: int, reps, n: int) -> Batch:
    """Replications ``reps`` of ``n`` patients of a design: ``paper`` (the study's uniform scores, with its
    own population AUC per replication) or calibrated-logit scores at prevalence 0.3 whose logit offsets are
    ``binormal`` (normal), ``skewed`` (a standardised Gamma(2)) or ``bimodal`` (a two-normal mixture)."""
    if shape == "paper":
        return generate_batch(seed, reps, n)
    if shape == "binormal":
        return generate_binormal_batch(seed, reps, n)
    spread = {"skewed": _skewed, "bimodal": _bimodal}.get(shape)
    if spread is None:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    return generate_logit_batch(seed, reps, n, spread, auc_population=shape_population_auc(shape))


def run_paper_coverage(out, *, shapes=SHAPES, ns=(1000, 10_000, 100_000, 1_000_000), reps=(200, 50, 20, 8),
                       settings=None, seed: int = 1, progress=sys.stderr) -> pd.DataFrame:
    """Run protocol mode (:func:`simulations.protocol.pipeline.run_protocol_chunk`) per shape and n; return the coverage.

    Each (shape, n, chunk) is saved under ``out/results`` and skipped when present (a run resumes).
    Returns :func:`simulations.protocol.coverage.coverage_table` per (shape, n), with those two columns in front.
    """
    out = Path(out)
    (out / "results").mkdir(parents=True, exist_ok=True)
    chosen = select_settings(settings, mode="protocol")
    if len(reps) != len(ns):
        raise ValueError(f"reps must give one count per n ({len(ns)}), got {len(reps)}")
    tables = []
    for shape in shapes:
        for n, count in zip(ns, reps):
            chunk = max(1, min(int(count), MAX_ELEMENTS // int(n)))
            frames = []
            for start in range(0, int(count), chunk):
                path = out / "results" / f"{shape}_n={n}_reps={start}-{min(start + chunk, count)}.csv.gz"
                if not path.exists():
                    batch = shape_batch(shape, seed, range(start, min(start + chunk, count)), n)
                    frame = run_protocol_chunk(seed, batch.reps, chosen, n=n, batch=batch)
                    frame.to_csv(path.with_suffix(".tmp"), index=False, compression="gzip")
                    path.with_suffix(".tmp").replace(path)
                    if progress is not None:
                        print(f"{shape} n={n} replications {start}-{min(start + chunk, count)} done", file=progress, flush=True)
                frames.append(pd.read_csv(path, keep_default_na=False, na_values=[""]))
            table = coverage_table(pd.concat(frames, ignore_index=True))
            tables.append(table.assign(shape=shape, n=n))
    cols = ["shape", "n"]
    result = pd.concat(tables, ignore_index=True)
    return result[cols + [c for c in result.columns if c not in cols]]


def write_paper_coverage(out, table: pd.DataFrame) -> Path:
    """Write ``paper_coverage.csv`` and a markdown table of the pooled coverage (paper / corrected) per shape and n."""
    out = Path(out)
    table.to_csv(out / "paper_coverage.csv", index=False)
    rows = table[table["subset"] == "all"]
    lines = ["| shape | n | setting | tau | reps | paper CI: pooled | corrected CI: pooled | corrected: population | corrected width |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        lines.append(f"| {r.shape} | {r.n} | {r.setting} | {r.tau:.3f} | {r.replications} | {r.paper_coverage_pooled:.3f} | "
                     f"{r.corrected_coverage_pooled:.3f} | {r.corrected_coverage_population:.3f} | {r.corrected_mean_width:.4f} |")
    path = out / "paper_coverage.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def annotate_recommended(recommended: pd.DataFrame, coverage: pd.DataFrame) -> pd.DataFrame:
    """``recommended`` with ``corrected_coverage``: the noise-corrected CI's worst pooled coverage in the study.

    For each recommended setting the study's setting with the smallest ``tau`` at least the setting's
    (coverage falls as the noise grows: the conservative neighbour) gives its smallest coverage of the
    pooled AUC over every shape and n; NaN when the setting's ``tau`` exceeds every studied one.
    """
    rows = coverage[coverage["subset"] == "all"]
    worst = rows.groupby("tau")["corrected_coverage_pooled"].min().sort_index()
    taus = worst.index.to_numpy()
    out = recommended.copy()
    values = []
    for tau in out["tau"].to_numpy():
        above = np.flatnonzero(taus >= tau * (1 - 1e-9))
        values.append(float(worst.iloc[above[0]]) if above.size else np.nan)
    out["corrected_coverage"] = values
    return out
