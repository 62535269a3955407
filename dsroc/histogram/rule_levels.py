"""The levels of the histogram AUC rule: how well a fit must pass and how closely two estimators must agree."""

__all__ = ["FIT_LEVEL", "SHAPE_FIT_LEVEL", "AGREEMENT_SHARE", "AGREEMENT_Z", "RESOLUTION_SHARE"]

# The ROC-GLM is not used where the chi-square of its residuals at the ROC points rejects it at this level. At 0.01
# it handed 41 % of the secagg replications of the skewed design at n = 10 000 to the noisier resolved AUC (MAE
# 0.0016 against the ROC-GLM's 0.0013); at 1e-4 bimodal and piecewise-uniform scores at n = 10 000 stay rejected.
FIT_LEVEL = 1e-4
# Where the shape AUC is the fallback (the quantile grid's first stage is known) the test is stricter: the shape AUC
# is as precise as the counts, so rejecting a fit costs little, and on bimodal scores at prevalence 0.02 the ROC-GLMs
# that passed at 1e-4 had p = 1e-4 to 0.01 in 22 of 31 replications and erred by -0.05 (the shape AUC there: -0.018).
SHAPE_FIT_LEVEL = 0.01
# With score sums the test must be possible (MIN_COUNT patients of each class on either side of three edges): on
# bimodal scores at n = 1 000 untestable fits were off by -0.09 and covered 0.5.
# With score sums: the ROC-GLM is used where |ROC-GLM - resolved| <= AGREEMENT_SHARE x the resolved AUC's shift of
# the within-bin pairs + AGREEMENT_Z SD(difference).
AGREEMENT_SHARE = 0.25
AGREEMENT_Z = 2.58
# The resolved AUC's interval is widened by this share of the shift it gives the within-bin pairs, so it holds the
# binned AUC. Without noise the logistic model on the first stage's shape erred by up to a tenth of that shift, but
# on bimodal scores at AUC 0.6 (4 bins) by a third, and with the noise by 0.8 of it (coverage 0.74 at 0.25).
RESOLUTION_SHARE = 1.0
