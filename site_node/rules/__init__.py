"""The site's request rules: the disclosure guard, the disclosure auditor, and the models the administrator approved."""

from .approvals import ModelApprovals, approve_model, model_from_json, model_hash
from .disclosure import DisclosureStore, calibration_queries, confusion_queries
from .guard import (SiteSensitivity, analyst_input, check_edges, check_grid, check_release_parameters, check_theta,
    check_threshold, release_sensitivity, require_privacy_level, site_sensitivity)

__all__ = ["ModelApprovals", "approve_model", "model_from_json", "model_hash", "DisclosureStore",
           "calibration_queries", "confusion_queries", "SiteSensitivity", "analyst_input", "check_edges",
           "check_grid", "check_release_parameters", "check_theta", "check_threshold", "release_sensitivity",
           "require_privacy_level", "site_sensitivity"]
