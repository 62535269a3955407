"""Why the histogram AUC rule reported the AUC it did: the first AUC note of a validation, in words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rule_levels import AGREEMENT_SHARE, AGREEMENT_Z, FIT_LEVEL, RESOLUTION_SHARE, SHAPE_FIT_LEVEL

__all__ = ["RuleTrace", "auc_reason"]


@dataclass(frozen=True)
class RuleTrace:
    """What the histogram AUC rule saw and chose for one row: the quantities its note names.

    ``asked``/``used``: the estimator asked for and the one reported; ``with_sums``: the score sums were released;
    ``shaped``: the nonparametric curve is the shape AUC; ``points``: the ROC-GLM's usable edges; ``auc_glm``,
    ``pvalue``: its AUC and fit test; ``diff``, ``diff_sd``: the ROC-GLM less the resolved AUC and that
    difference's noise SD; ``resolution``, ``widening``, ``bound``: the resolved AUC's shift, the interval's
    widening and the binning bound; ``auc_emp``: the binned AUC; ``curve_diff``, ``curve_sd``: the curve less the
    resolved AUC and its SD; ``glm_shape``, ``glm_shape_sd``: the ROC-GLM less the shape AUC and its SD;
    ``shape_rejects``: the ROC-GLM agrees with the resolved AUC but not with the shape AUC; ``outvoted``: the
    ROC-GLM and the shape AUC agree with each other but not with the resolved AUC (fields of
    :class:`dsroc.histogram.estimates.AucEstimates` where they share a name).
    """

    asked: str
    used: str
    with_sums: bool
    shaped: bool
    points: int
    auc_glm: float
    pvalue: float
    diff: float
    diff_sd: float
    resolution: float
    widening: float
    bound: float
    auc_emp: float
    curve_diff: float
    curve_sd: float
    glm_shape: float = float("nan")
    glm_shape_sd: float = float("nan")
    shape_rejects: bool = False
    outvoted: bool = False


def auc_reason(trace: RuleTrace) -> str:
    """Why a row's reported AUC is the one it is (the first AUC note of a validation), in words."""
    t = trace
    asked, used, with_sums, shaped, points = t.asked, t.used, t.with_sums, t.shaped, t.points
    auc_glm, pvalue, diff, diff_sd, bound, auc_emp = t.auc_glm, t.pvalue, t.diff, t.diff_sd, t.bound, t.auc_emp
    resolution, widening, curve_diff, curve_sd = t.resolution, t.widening, t.curve_diff, t.curve_sd
    glm_shape, glm_shape_sd, shape_rejects, outvoted = t.glm_shape, t.glm_shape_sd, t.shape_rejects, t.outvoted
    agreement = (f"|ROC-GLM - resolved| = {abs(diff):.4f} against {AGREEMENT_SHARE:g} x the resolved AUC's shift "
                 f"{resolution / RESOLUTION_SHARE:.4f} + {AGREEMENT_Z} x its noise SD {diff_sd:.4f}")
    with_shape = (f"|ROC-GLM - shape| = {abs(glm_shape):.4f} against {AGREEMENT_SHARE:g} x the resolved AUC's shift "
                  f"{resolution / RESOLUTION_SHARE:.4f} + {AGREEMENT_Z} x its noise SD {glm_shape_sd:.4f}")
    identified = (f"|ROC-GLM - binned| = {abs(auc_glm - auc_emp):.4f} against half the share of within-bin pairs "
                  f"{bound:.4f}")
    fit = ("no test: fewer than 3 usable points" if not np.isfinite(pvalue) else
           f"chi-square p = {pvalue:.3g} against the noisy ROC points")
    if used == "rocglm":
        why = f"its AUC agrees with the resolved AUC ({agreement}) and lies in the binned counts' range ({identified})" \
            if with_sums else "converged, increasing, within the binning bound of the binned AUC"
        if np.isfinite(glm_shape):
            why = f"{why}; it agrees with the shape AUC ({with_shape})"
        why = f"the binormal curve fits ({fit}); {why}"
        return (f"the ROC-GLM through {int(points)} edges: {why}; its interval is widened by {widening:.4f} for "
                "misfit (its larger disagreement, with the resolved or the shape AUC, beyond one noise SD of it)")
    if asked == "rocglm":
        if not np.isfinite(auc_glm):
            glm = f"no plausible ROC-GLM fit ({int(points)} usable edge(s); or not converged, or not increasing)"
        elif with_sums and not np.isfinite(pvalue):
            glm = f"the binormal ROC-GLM's fit cannot be tested ({fit})"
        elif pvalue < (level := SHAPE_FIT_LEVEL if shaped else FIT_LEVEL):
            glm = f"the binormal ROC-GLM does not fit the ROC points ({fit} < {level:g})"
        elif with_sums and np.isfinite(diff) and abs(auc_glm - auc_emp) > bound:
            glm = f"the ROC-GLM's AUC lies outside what the binned counts allow: {identified}"
        elif shape_rejects:
            glm = f"the ROC-GLM does not agree with the shape AUC: {with_shape}"
        elif with_sums and np.isfinite(diff):
            glm = f"the ROC-GLM does not fit: {agreement}"
        else:
            glm = "no plausible ROC-GLM fit (outside the binning bound of the binned AUC)"
    else:
        glm = "asked for"
    curve = "shape" if shaped else "monotone"
    monotone = f"|{curve} - resolved| = {abs(curve_diff):.4f} against {AGREEMENT_Z} x its noise SD {curve_sd:.4f}"
    if used in ("monotone", "shape"):
        why = glm if asked == used else f"{glm}; it agrees with the resolved AUC: {monotone}"
        if outvoted:
            why = (f"{glm}; the {curve} curve does not agree with the resolved AUC ({monotone}) but the ROC-GLM agrees "
                   f"with it ({with_shape}): two models agree against the resolved AUC, whose score sums' noise is the "
                   "likelier cause")
        what = ("the shape AUC (inside each bin the first stage's shape of all scores, split between the classes by "
                "the positives' share interpolated across the bins; " if shaped else
                "the monotone (PCHIP) ROC curve through the ROC points at the edges (")
        return (f"{what}{why}); its interval is widened by {widening:.4f}: {RESOLUTION_SHARE:g} x the resolved "
                "AUC's shift of the within-bin pairs (the curve interpolates within the bins) plus its misfit (the "
                "disagreement beyond one noise SD)")
    if used == "resolved":
        if asked == "rocglm" and np.isfinite(curve_diff):
            glm = f"{glm}; the {curve} curve does not agree: {monotone}"
        return (f"the resolved AUC (within-bin pairs ordered by the classes' mean score offsets; {glm}); its "
                f"interval is widened by {widening:.4f}, {RESOLUTION_SHARE:g} x the shift it gives the within-bin pairs")
    return (f"the binned empirical AUC ({glm}); its interval is widened by +-{bound:.4f}, half the share of "
            "within-bin pairs, which the binning cannot order")
