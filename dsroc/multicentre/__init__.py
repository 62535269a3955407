"""Multicentre validation: random-effects pooling across sites, decision curves, subgroups and paired model comparison."""

from .decision_curve import DecisionCurve, decision_curve
from .meta_analysis import (MetaAnalysis, PooledEstimate, logit_auc, log_oe, pool_estimates, pooled_weights,
                            random_effects)
from .paired import PairedAUC, joint_grid, paired_auc_difference
from .subgroups import StratumDifference, SubgroupAnalysis, subgroup_analysis

__all__ = ["MetaAnalysis", "random_effects", "logit_auc", "log_oe", "PooledEstimate", "pool_estimates", "pooled_weights", "DecisionCurve", "decision_curve",
           "PairedAUC", "paired_auc_difference", "joint_grid", "StratumDifference", "SubgroupAnalysis", "subgroup_analysis"]
