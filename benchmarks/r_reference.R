# The R reference of the paper-mode study (Schalk et al. 2024, github.com/difuture-lmu/simulations-distr-auc),
# run by benchmarks/r_reference.py on data exported from simulations.dgp: Rscript r_reference.R DIR
#
# Per replication, as the published simulation code does it (R/add-experiments.R, R/helper.R there):
# the empirical AUC with pROC, its DeLong variance and the logit CI (Pepe) around it; then per setting the
# noisy scores score + tau * noise truncated to [0, 1], the strict survivor function 1 - ecdf(negatives) at the
# positives, the indicator matrix U on seq(0, 1, length.out = 30), the weighted ROC-GLM data without the
# end points (28 thresholds), the probit fit -- here R's glm, not the published code's own Fisher scoring,
# whose deviance is a product of likelihoods (SPEC section 9) -- the AUC by integrate(), and the DeLong
# variance of the noisy scores from ecdf() with the logit CI centred at the empirical AUC.
# Then, timed apart (not part of the study): Brier score, calibration curve (dsBinVal's cut() into 10 bins)
# and pROC's DeLong Wald CI of the true scores.
# Only the loops are timed; reading the files and writing the results are not.

args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 1L) stop("usage: Rscript r_reference.R DIR")
if (!requireNamespace("pROC", quietly = TRUE)) {
  cat("the R package pROC is not installed\n", file = stderr())
  quit(status = 3L)
}
dir <- args[1L]
read_vec <- function(name, what, size) {
  path <- file.path(dir, name)
  readBin(path, what, n = file.size(path) / size, size = size, endian = "little")
}
sizes <- read_vec("sizes.i32", "integer", 4L)
taus <- read_vec("taus.f64", "double", 8L)
group <- rep(seq_along(sizes), sizes)
reps <- list(
  score = split(read_vec("scores.f64", "double", 8L), group),
  truth = split(read_vec("labels.i32", "integer", 4L), group),
  noise = split(read_vec("noise.f64", "double", 8L), group)
)
n_reps <- length(sizes)
n_set <- length(taus)
tset <- seq(0, 1, length.out = 30L)
alpha <- 0.05

pepe_ci <- function(auc, var_auc) {
  lauc <- log(auc / (1 - auc))
  half <- qnorm(1 - alpha / 2) * sqrt(var_auc) / (auc * (1 - auc))
  1 / (1 + exp(-(lauc + c(-1, 1) * half)))
}

delong_var_ecdf <- function(score, truth) {
  pos <- score[truth == 1]
  neg <- score[truth == 0]
  s1 <- 1 - ecdf(pos)(neg)
  s0 <- 1 - ecdf(neg)(pos)
  var(s1) / length(neg) + var(s0) / length(pos)
}

roc_glm <- function(score, truth) {
  pv <- 1 - ecdf(score[truth == 0])(score[truth == 1])
  u <- vapply(tset, function(t) ifelse(pv <= t, 1L, 0L), integer(length(pv)))
  data <- data.frame(
    y = rep(c(0, 1), times = length(tset)),
    x = rep(qnorm(tset), each = 2L),
    w = as.vector(apply(u, 2L, function(col) c(sum(col == 0L), sum(col == 1L))))
  )
  data <- data[is.finite(data$x), ]
  fit <- suppressWarnings(glm(y ~ x, family = binomial(link = "probit"), weights = w, data = data))
  params <- unname(coef(fit))
  auc <- integrate(function(t) pnorm(params[1L] + params[2L] * qnorm(t)), lower = 0, upper = 1)$value
  list(params = params, auc = auc, converged = fit$converged, counts = data$w[data$y == 1])
}

# study: per (replication, setting) one row of
#   auc_emp, var_true, ci_lower, ci_upper, gamma1, gamma2, auc_integrate, converged, var_dist, ci_lower_dist,
#   ci_upper_dist (and, after the timed loop, gamma1_mle, gamma2_mle)
study <- matrix(NA_real_, nrow = n_reps * n_set, ncol = 11L)
counts <- matrix(NA_integer_, nrow = n_reps * n_set, ncol = length(tset) - 2L)
t0 <- proc.time()
for (r in seq_len(n_reps)) {
  score <- reps$score[[r]]
  truth <- reps$truth[[r]]
  noise <- reps$noise[[r]]
  roc <- pROC::roc(truth, score, levels = c(0, 1), direction = "<", quiet = TRUE)
  auc_emp <- as.numeric(pROC::auc(roc))
  var_true <- pROC::var(roc, method = "delong")
  ci_true <- pepe_ci(auc_emp, var_true)
  for (s in seq_len(n_set)) {
    row <- (r - 1L) * n_set + s
    noisy <- if (taus[s] == 0) score else score + taus[s] * noise
    noisy <- ifelse(noisy < 0, 0, noisy)
    noisy <- ifelse(noisy > 1, 1, noisy)
    fit <- tryCatch(roc_glm(noisy, truth), error = function(e) NULL)
    var_dist <- delong_var_ecdf(noisy, truth)
    ci_dist <- pepe_ci(auc_emp, var_dist)
    if (!is.null(fit)) {
      study[row, 5:8] <- c(fit$params, fit$auc, fit$converged)
      counts[row, ] <- as.integer(fit$counts)
    }
    study[row, c(1:4, 9:11)] <- c(auc_emp, var_true, ci_true, var_dist, ci_dist)
  }
}
t_study <- proc.time() - t0

# Untimed: the same weighted data refitted by glm to the MLE. glm's deviance rule (default epsilon 1e-8) can stop
# ~1e-5 away from it and a deviance rule bounds the parameters only to about its square root, so glm is restarted
# at its own estimate (each call takes at least one IRLS step) until the estimate moves less than 1e-12.
mle <- matrix(NA_real_, nrow = n_reps * n_set, ncol = 2L)
x_inner <- qnorm(tset[2:29])
for (row in which(!is.na(counts[, 1L]) & study[, 8L] == 1)) {
  k <- counts[row, ]
  n1 <- sum(reps$truth[[(row - 1L) %/% n_set + 1L]])
  data <- data.frame(y = rep(c(0, 1), times = length(k)), x = rep(x_inner, each = 2L), w = as.vector(rbind(n1 - k, k)))
  start <- study[row, 5:6]
  for (step in 1:50) {
    fit <- suppressWarnings(glm(y ~ x, family = binomial(link = "probit"), weights = w, data = data, start = start,
                                control = glm.control(epsilon = 1e-14, maxit = 100L)))
    moved <- max(abs(coef(fit) - start))
    start <- unname(coef(fit))
    if (moved < 1e-12) break
  }
  mle[row, ] <- start
}
study <- cbind(study, mle)

# extra: per replication brier, wald_lower, wald_upper, then per bin (10) n, mean truth, mean score
extra <- matrix(NA_real_, nrow = n_reps, ncol = 33L)
breaks <- seq(0, 1, length.out = 11L)
t0 <- proc.time()
for (r in seq_len(n_reps)) {
  score <- reps$score[[r]]
  truth <- reps$truth[[r]]
  brier <- mean((truth - score)^2)
  roc <- pROC::roc(truth, score, levels = c(0, 1), direction = "<", quiet = TRUE)
  wald <- as.numeric(pROC::ci.auc(roc, method = "delong"))[c(1L, 3L)]
  bins <- cut(score, breaks)
  n_bin <- as.numeric(table(bins))
  means <- stats::aggregate(data.frame(truth, score), by = list(bin = bins), FUN = "mean", drop = FALSE)
  extra[r, ] <- c(brier, wald, rbind(n_bin, means$truth, means$score))
}
t_extra <- proc.time() - t0

writeBin(as.vector(t(study)), file.path(dir, "r_study.f64"), size = 8L, endian = "little")
writeBin(as.vector(t(counts)), file.path(dir, "r_counts.i32"), size = 4L, endian = "little")
writeBin(as.vector(t(extra)), file.path(dir, "r_extra.f64"), size = 8L, endian = "little")
cpu <- function(t) sum(t[c("user.self", "sys.self")])
cat(sprintf("study_wall %.6f\nstudy_cpu %.6f\nextra_wall %.6f\nextra_cpu %.6f\n",
            t_study[["elapsed"]], cpu(t_study), t_extra[["elapsed"]], cpu(t_extra)))
