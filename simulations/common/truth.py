"""The reference of every setting: empirical AUC and DeLong logit CI of each replication's pooled true scores."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dsroc import auc_ci_batch
from dsroc.roc.auc import BatchCI
from dsroc.roc.batch import grouped_class_placements, grouped_delong_variance, grouped_mean

from .dgp import Batch

__all__ = ["Truth", "pooled_truth"]


class Truth(NamedTuple):
    """Per replication: the empirical AUC, its DeLong variance and logit CI (``ci.defined`` False at 0 or 1)."""

    auc_emp: np.ndarray
    var_true: np.ndarray
    ci: BatchCI


def pooled_truth(batch: Batch) -> Truth:
    """Empirical (Mann-Whitney) AUC, DeLong variance and logit CI of the true scores of every replication.

    Mid-rank placement values with one grouped sort; equal to ``empirical_auc``, ``delong_variance`` and
    ``auc_ci`` on each replication alone (to rounding, ~1e-15).
    """
    g, y, n_groups = batch.groups, batch.labels, batch.size
    truth = grouped_class_placements(batch.scores, y, g, n_groups=n_groups, ties="mid")
    neg = y == 0
    auc_emp = grouped_mean(truth.pv[neg], g[neg], n_groups=n_groups)  # mean PV1 = Mann-Whitney AUC
    var_true = grouped_delong_variance(truth, y, g, n_groups=n_groups)
    return Truth(auc_emp, var_true, auc_ci_batch(auc_emp, var_true))
