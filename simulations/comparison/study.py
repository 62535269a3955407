"""Protocol comparison: AUC accuracy and CI coverage of every protocol at its stated guarantee, against epsilon.

Design: binormal scores (:mod:`simulations.common.binormal`), prevalence 0.3, five sites,
n in {250, 1 000, 10 000}. Protocols, each at the (epsilon, delta) it states:

- ``histogram``: the histogram protocol as shipped -- the recommended grid for the noise
  (:func:`dsroc.histogram.grid.recommended_n_bins`) and the ROC-GLM through the edges; (epsilon, delta)-DP
  for the whole validation per patient (add/remove-one);
- ``histogram-flat20``: the baseline of SPEC-private -- 20 equal bins, binned empirical AUC;
- ``paper-range``: the paper's protocol with the formal sensitivity rule ``range`` (Delta = 1, the score
  range): (epsilon, delta)-DP for the score release only, the rest q-protected;
- ``histogram-secagg``: the secagg protocol -- the sites' counts summed under pairwise masks, each site
  adding its share of a distributed discrete Gaussian whose five shares meet (epsilon, delta)
  (:func:`dsroc.secagg.share_sigma`); the assumption of FedCurve, so comparable with its figures.
The reference in every replication is the pooled empirical AUC of the true scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..common.binormal import generate_binormal_batch
from ..histogram.study import histogram_frame
from ..protocol.pipeline import run_protocol_chunk
from ..common.settings import Setting

__all__ = ["COMPARE_NS", "COMPARE_PRIVACY", "PROTOCOLS", "COMPARE_COLUMNS", "CompareSetting", "compare_settings",
           "run_compare_chunk"]

COMPARE_NS = (250, 1000, 10000)
COMPARE_PRIVACY = ((0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-5), (5.0, 1e-5), (10.0, 1e-5), (5.0, 0.01))
PROTOCOLS = ("histogram", "histogram-flat20", "paper-range", "histogram-secagg")
GUARANTEES = {
    "histogram": "(eps, delta)-DP for the whole validation, per patient (add/remove-one)",
    "histogram-flat20": "(eps, delta)-DP for the whole validation, per patient (add/remove-one)",
    "paper-range": "(eps, delta)-DP for the score release only (Delta = score range); other answers q-protected, not DP",
    "histogram-secagg": "(eps, delta)-DP for the whole validation, per patient, against the analyst alone (secagg protocol)",
}
COMPARE_COLUMNS = ["setting", "protocol", "n", "epsilon", "delta", "tau", "rep", "n1", "auc_emp", "auc_est",
                   "ci_lower", "ci_upper", "failure"]


@dataclass(frozen=True)
class CompareSetting:
    """One cell of the comparison: a protocol at a sample size and (epsilon, delta)."""

    protocol: str
    n: int
    epsilon: float
    delta: float

    @property
    def setting(self) -> Setting:
        """The privacy setting the protocol runs with (discrete Gaussian of a count, or Gaussian with Delta = 1)."""
        if self.protocol.startswith("histogram"):
            return Setting(1.0, self.epsilon, self.delta, True)
        return Setting(1.0, self.epsilon, self.delta)

    @property
    def name(self) -> str:
        """Stable identifier."""
        return f"{self.protocol}_n={self.n}_eps={self.epsilon:g}_delta={self.delta:g}"


def compare_settings(names=None) -> list[CompareSetting]:
    """All comparison cells (protocol x n x privacy), or those named."""
    cells = [CompareSetting(p, n, e, d) for p in PROTOCOLS for n in COMPARE_NS for e, d in COMPARE_PRIVACY]
    if not names:
        return cells
    unknown = set(names) - {c.name for c in cells}
    if unknown:
        raise ValueError(f"unknown comparison setting(s) {sorted(unknown)}; e.g. '{cells[0].name}'")
    return [c for c in cells if c.name in set(names)]


def _frame(cell: CompareSetting, results: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "setting": cell.name, "protocol": cell.protocol, "n": cell.n, "epsilon": cell.epsilon, "delta": cell.delta,
        "tau": results["tau"].to_numpy(), "rep": results["rep"].to_numpy(), "n1": results["n1"].to_numpy(),
        "auc_emp": results["auc_emp"].to_numpy(), "auc_est": results["auc_rocglm"].to_numpy(),
        "ci_lower": results["ci_lower_dist"].to_numpy(), "ci_upper": results["ci_upper_dist"].to_numpy(),
        "failure": results["failure"].to_numpy(),
    })[COMPARE_COLUMNS]


def run_compare_chunk(seed: int, reps, settings, *, n: int | None = None) -> pd.DataFrame:
    """Replications ``reps`` of every comparison cell in ``settings``; one binormal batch per n, shared by
    all protocols and privacy settings (common data, as in the paper's study). Each cell fixes its own n,
    so ``n`` must be None (the runner's option of the other modes)."""
    if n is not None:
        raise ValueError("n is fixed per cell in compare mode (n = 250, 1000, 10000); do not pass n")
    frames = []
    cells = list(settings)
    for n in sorted({c.n for c in cells}):
        batch = generate_binormal_batch(seed, reps, n)
        for cell in (c for c in cells if c.n == n):
            if cell.protocol == "histogram":
                res = histogram_frame(batch, seed, [cell.setting])
            elif cell.protocol == "histogram-secagg":
                res = histogram_frame(batch, seed, [cell.setting], secure_aggregation=True)
            elif cell.protocol == "histogram-flat20":
                res = histogram_frame(batch, seed, [cell.setting], n_bins=20, estimator="empirical")
            else:
                res = run_protocol_chunk(seed, reps, [cell.setting], batch=batch)
            frames.append(_frame(cell, res))
    order = {c.name: i for i, c in enumerate(cells)}
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values("setting", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def compare_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per protocol, n and (epsilon, delta): replications, failures, bias, MAE, RMSE (estimate minus the pooled
    empirical AUC), CI coverage of the pooled empirical AUC and mean CI width."""
    rows = []
    for (protocol, n, eps, delta), part in results.groupby(["protocol", "n", "epsilon", "delta"], sort=False):
        ok = part[np.isfinite(part["auc_est"])]
        err = ok["auc_est"] - ok["auc_emp"]
        ci = ok[np.isfinite(ok["ci_lower"])]
        rows.append({
            "protocol": protocol, "n": n, "epsilon": eps, "delta": delta, "tau": part["tau"].iat[0],
            "replications": len(part), "failures": int(len(part) - len(ok)),
            "bias": err.mean(), "mae": err.abs().mean(), "rmse": float(np.sqrt((err**2).mean())),
            "coverage": ((ci["ci_lower"] <= ci["auc_emp"]) & (ci["auc_emp"] <= ci["ci_upper"])).mean(),
            "mean_ci_width": (ci["ci_upper"] - ci["ci_lower"]).mean(),
            "guarantee": GUARANTEES[protocol],
        })
    return pd.DataFrame(rows).sort_values(["protocol", "n", "delta", "epsilon"], ascending=[True, True, False, True],
                                          ignore_index=True)
