"""The other seeds' private AUC mechanisms: Boyd, Lantz and Page (2015) and Sun et al. (2022).

Each mechanism states its privacy unit (:data:`boyd.PRIVACY_UNIT`, :data:`fedauc.PRIVACY_UNIT`): Boyd
protects rows under bounded DP, FedAUC protects labels only. Never compare them on epsilon alone.
"""

from . import boyd, fedauc
from .boyd import (
    DPRelease,
    NoiseCalibration,
    ap_local_sensitivity,
    auc_local_sensitivity,
    combine_site_releases,
    dp_class_count,
    dp_auc,
    dp_average_precision,
    dp_binormal_roc,
    smooth_noise,
    smooth_noise_calibration,
    smooth_sensitivity,
    smooth_sensitivity_release,
)
from .fedauc import (
    FedAUCResult,
    debias_auc,
    fedauc_laplace,
    fedauc_laplace_sd,
    fedauc_rr,
    flip_probability,
    global_ranks,
    randomized_response,
    rank_auc,
    site_rank_statistics,
    site_release,
)

__all__ = [
    "boyd", "fedauc",
    "DPRelease", "NoiseCalibration", "auc_local_sensitivity", "ap_local_sensitivity", "smooth_sensitivity",
    "smooth_noise_calibration", "smooth_noise", "smooth_sensitivity_release", "dp_auc", "dp_average_precision", "dp_binormal_roc",
    "dp_class_count", "combine_site_releases",
    "FedAUCResult", "global_ranks", "rank_auc", "flip_probability", "randomized_response", "debias_auc",
    "fedauc_rr", "fedauc_laplace", "fedauc_laplace_sd", "site_rank_statistics", "site_release",
]
