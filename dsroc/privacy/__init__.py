"""Privacy maths: (discrete) Gaussian and discrete Laplace noise, the accountant, sensitivity, auditing, privacy level."""

from .._lazy import export_lazily

_EXPORTS = {
    # .accounting
    "Gaussian": "accounting", "DiscreteGaussian": "accounting", "DiscreteGaussianSum": "accounting", "DiscreteLaplace": "accounting",
    "Laplace": "accounting",
    "RandomizedResponse": "accounting", "PureEpsilon": "accounting", "ApproximateDp": "accounting",
    "Event": "accounting", "Accountant": "accounting", "VALUE_DISCRETIZATION": "accounting",
    "discretization_for": "accounting", "encode_event": "accounting", "decode_event": "accounting",
    # .auditing
    "CountQuery": "auditing", "AuditResult": "auditing", "atoms": "auditing",
    "small_determined_group": "auditing", "audit_counts": "auditing", "PRIME": "auditing",
    # .distributed
    "summed_noise_log_pmf": "distributed", "summed_noise_pld": "distributed", "summed_noise_variance": "distributed",
    # .gaussian
    "analytic_gaussian_sigma": "gaussian", "classical_gaussian_sigma": "gaussian", "gdp_release_mu": "gaussian",
    "gdp_mu": "gaussian", "gdp_delta": "gaussian", "gdp_epsilon": "gaussian", "add_gaussian_noise": "gaussian",
    # .guard
    "require_privacy_level": "guard",
    # .laplace
    "discrete_laplace_variance": "laplace", "discrete_laplace_sd": "laplace", "discrete_laplace_scale": "laplace",
    "discrete_laplace_scales": "laplace",
    "sample_discrete_laplace": "laplace", "discrete_laplace_noise": "laplace",
    # .noise
    "discrete_gaussian_delta": "noise", "discrete_gaussian_sigma": "noise",
    "discrete_gaussian_variance": "noise", "sample_discrete_gaussian": "noise",
    "discrete_gaussian_noise": "noise",
    # .sensitivity
    "SensitivityEstimate": "sensitivity", "model_sensitivity": "sensitivity",
}

__all__ = [
    "Gaussian", "DiscreteGaussian", "DiscreteGaussianSum", "DiscreteLaplace", "Laplace", "RandomizedResponse", "PureEpsilon", "ApproximateDp", "Event",
    "Accountant", "VALUE_DISCRETIZATION", "discretization_for", "encode_event", "decode_event",
    "summed_noise_log_pmf", "summed_noise_pld", "summed_noise_variance",
    "CountQuery", "AuditResult", "atoms", "small_determined_group", "audit_counts", "PRIME",
    "analytic_gaussian_sigma", "classical_gaussian_sigma", "gdp_release_mu", "gdp_mu", "gdp_delta",
    "gdp_epsilon", "add_gaussian_noise",
    "require_privacy_level",
    "discrete_laplace_variance", "discrete_laplace_sd", "discrete_laplace_scale", "discrete_laplace_scales",
    "sample_discrete_laplace",
    "discrete_laplace_noise",
    "discrete_gaussian_delta", "discrete_gaussian_sigma", "discrete_gaussian_variance",
    "sample_discrete_gaussian", "discrete_gaussian_noise",
    "SensitivityEstimate", "model_sensitivity",
]

export_lazily(__name__, _EXPORTS)
