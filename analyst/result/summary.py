"""The readable summary of a validation result, the same layout for every protocol."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np

__all__ = ["bin_labels", "describe_source", "fmt", "full_lines", "guarantee_text", "head_lines", "interval_text",
           "plural", "spent_at"]

_CI_NAMES = {"logit": "logit-scale", "wald": "Wald (AUC-scale)"}


def fmt(x, digits: int = 4) -> str:
    """``x`` with ``digits`` decimals, ``-`` for None or a non-finite value."""
    if x is None or not math.isfinite(float(x)):
        return "-"
    return f"{float(x):.{digits}f}"


def interval_text(value, lower, upper) -> str:
    """``value [lower, upper]`` with three decimals, ``not estimable`` for a non-finite value."""
    if not math.isfinite(value):
        return "not estimable"
    return f"{value:.3f} [{lower:.3f}, {upper:.3f}]"


def plural(k: int, word: str) -> str:
    """``1 site``, ``2 sites``."""
    return f"{k} {word}{'' if k == 1 else 's'}"


def describe_source(text: str, width: int = 60) -> str:
    """A score source in words: ``column:pred`` -> ``score column 'pred'``, a GLM as its link and size."""
    if text.startswith("glm:"):
        try:
            spec = json.loads(text[4:])
            return f"a GLM ({spec['link']} link, {plural(len(spec['coefficients']), 'coefficient')})"
        except (ValueError, KeyError, TypeError):
            pass
    if text.startswith("column:"):
        return f"score column '{text[7:]}'"
    return "'" + (text if len(text) <= width else text[: width - 3] + "...") + "'"


def bin_labels(lower, upper, *, digits: int = 2) -> list[str]:
    """Bin labels ``[a, b)``, the last one closed ``[a, b]`` (a score equal to the top edge belongs to it)."""
    lower, upper = list(lower), list(upper)
    # enough digits (at most 3) to tell explicit edges such as 0.05 or 0.125 apart
    while digits < 3 and any(round(v, digits) != round(v, 12) for v in lower + upper):
        digits += 1
    return [f"[{lo:.{digits}f}, {up:.{digits}f}{']' if k == len(lower) - 1 else ')'}"
            for k, (lo, up) in enumerate(zip(lower, upper))]


def _ci(e, pct: int, digits: int = 3) -> str:
    if e is None:
        return "not estimable"
    if not (math.isfinite(e.lower) and math.isfinite(e.upper)):
        return fmt(e.value, digits)
    return f"{fmt(e.value, digits)} {pct}% CI [{fmt(e.lower, digits)}, {fmt(e.upper, digits)}]"


def spent_at(p) -> str:
    """Epsilon of a site's releases so far at the request's delta, by its accountant ("-" when the site does not say)."""
    return f"{p.epsilon_spent_at_delta:.2f}" if math.isfinite(p.epsilon_spent_at_delta) else "-"


def guarantee_text(r) -> str:
    """What this validation's releases compose to per patient (:attr:`ValidationResult.guarantee_epsilon`), with the
    request and the releases per site; the request alone when no site composed them (sites from before)."""
    counts = sorted({p.releases for p in r.privacy.values()})
    if not counts or counts[0] == 0:
        return f"epsilon = {r.epsilon:g}, delta = {r.delta:g} per release (not composed by the sites)"
    releases = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return (f"this validation: epsilon {r.guarantee_epsilon:.4g} at delta {r.delta:g} per patient ({releases} "
            f"release{'s' if counts[-1] > 1 else ''} per site composed by its ledger; asked epsilon {r.epsilon:g})")


def _head(r) -> list[str]:
    counts = (f"n = {r.n:.0f} (negatives {r.n0:.0f}, positives {r.n1:.0f})" if r.counts_exact else
              f"n = {r.n:.0f} (negatives {r.n0:.0f}, positives {r.n1:.0f}; estimated from the noisy counts)")
    what = f"outcome '{r.outcome}'"
    if r.time is not None:
        counts = (f"n = {r.n:.0f} (events by {r.horizon:g}: {r.n1:.0f}, followed beyond it: {r.n0:.0f}, censored "
                  f"before it: {r.n - r.n0 - r.n1:.0f}; estimated from the noisy counts)")
        what = f"time '{r.time}', event '{r.outcome}', risks by the horizon {r.horizon:g}"
    return [
        f"Distributed validation of {r.score_description} on dataset '{r.dataset}', {what}",
        f"  {plural(len(r.sites), 'site')}: {', '.join(r.sites)}   {counts}",
        f"  protocol: {r.protocol}   privacy unit: {r.privacy_unit}",
        f"  privacy: {guarantee_text(r)}",
        "  covered: " + textwrap.fill(r.guarantee, width=100, subsequent_indent="    "),
        "",
    ]


def _headline(r, pct: int) -> list[str]:
    label = f"AUC ({r.auc_estimator})"
    se = fmt(math.sqrt(r.auc_variance) if r.auc_variance >= 0 else None)
    lines = [f"{label:<22} {fmt(r.auc)}   {pct}% CI [{fmt(r.auc_ci[0])}, {fmt(r.auc_ci[1])}] "
             f"({_CI_NAMES.get(r.ci_method, r.ci_method)} CI, SE {se}; includes {r.auc_ci_includes})"]
    if r.detail is not None:
        lines += r.detail.summary_lines(r, pct)
    if r.test is not None:
        where = "lies" if r.test.reject else "does not lie"
        lines.append(f"Test H0: AUC <= {r.test.a0:g}   {'rejected' if r.test.reject else 'not rejected'}: "
                     f"the {pct}% CI {where} wholly above {r.test.a0:g} (one-sided level {(1 - r.test.level) / 2:g})")
    if r.brier is not None:
        b = r.brier
        interval = (f"   {pct}% CI [{fmt(b.lower)}, {fmt(b.upper)}]" if math.isfinite(b.lower) else "")
        lines.append(f"{'Brier score':<22} {fmt(b.value)}{interval} ({b.includes})")
    if r.confusion is not None:
        c = r.confusion
        lines += [f"At threshold {c.threshold:g} (score >= {c.threshold:g} predicts 1):  "
                  f"TP {c.tp:.0f}  FP {c.fp:.0f}  FN {c.fn:.0f}  TN {c.tn:.0f}",
                  f"  sensitivity {fmt(c.sensitivity)}  specificity {fmt(c.specificity)}  "
                  f"PPV {fmt(c.ppv)}  NPV {fmt(c.npv)}"]
    if r.pr is not None:
        lines += [textwrap.fill(str(r.pr), width=104, subsequent_indent="  ")]
    return lines


def _calibration(r, pct: int) -> list[str]:
    c = r.calibration
    if c is None:
        return []
    lines = ["", f"Calibration hierarchy (Van Calster et al. 2016; intervals: {c.interval})",
             f"  mean:     O/E {_ci(c.oe, pct)} (1 ideal); calibration-in-the-large {_ci(c.citl, pct)} (0 ideal)",
             f"  weak:     calibration slope {_ci(c.slope, pct)} (1 ideal; below 1: predictions too extreme)",
             f"  moderate: the curve below; binned ICI {fmt(c.ici, 3)}, Emax {fmt(c.emax, 3)}",
             "",
             f"Calibration per bin (mean score: {c.predicted_from})"]
    labels = bin_labels(c.lower, c.upper)
    width = max(len(b) for b in labels)
    lines.append(f"  {'bin':<{width}}  {'n':>7}   mean score   observed   {pct}% interval")
    for k, label in enumerate(labels):
        n = f"{c.count[k]:7.0f}" if np.isfinite(c.count[k]) and c.count[k] > 0 else f"{'-':>7}"
        interval = (f"[{fmt(c.observed_lower[k], 3)}, {fmt(c.observed_upper[k], 3)}]"
                    if np.isfinite(c.observed_lower[k]) else "")
        note = "" if c.status[k] == "released" else f"   ({c.status[k]})"
        lines.append(f"  {label:<{width}}  {n}   {fmt(c.predicted[k]):>10}   {fmt(c.observed[k]):>8}   "
                     f"{interval:<16}{note}".rstrip())
    lines += [textwrap.fill(note, width=104, initial_indent="  ", subsequent_indent="    ") for note in c.notes]
    return lines


def _privacy(r) -> list[str]:
    w = max([4] + [len(n) for n in r.privacy])
    bounds = sorted({p.accounting for p in r.privacy.values() if p.accounting})
    how = f"composed by each site's ledger: {', '.join(bounds)}" if bounds else "as each site reported its release"
    lines = ["", f"Privacy per site (each site chose its sensitivity and noise; this validation's releases {how})",
             f"  {'site':<{w}}  {'n':>7}  {'sensitivity':<14} {'noise SD':<9} {'releases':>8}  "
             f"{'epsilon':<8} epsilon spent so far at delta {r.delta:g}; at the budget's delta, of the budget"]
    for name, p in r.privacy.items():
        sens = f"{p.sensitivity:.4g} ({p.sensitivity_rule})"
        budget = (f"{p.epsilon_spent:.2f} of {p.budget_epsilon:g} at delta {p.budget_delta:g}"
                  if math.isfinite(p.budget_epsilon) else f"{p.epsilon_spent:.3g} at the budget's delta")
        releases = str(p.releases) if p.releases else "-"
        lines.append(f"  {name:<{w}}  {p.n:>7.0f}  {sens:<14} {p.noise_sd:<9.4g} {releases:>8}  {p.epsilon:<8.4g} "
                     f"{spent_at(p)}; {budget}{' (repeated release, nothing charged)' if p.repeated else ''}")
    if any(not p.formal_bound for p in r.privacy.values()):
        lines.append("  note: a 'model' sensitivity is estimated from the site's data, not a formal bound")
    return lines


def _decision_curve(dc, pct: int) -> list[str]:
    lines = ["", f"Decision curve (net benefit with {pct}% CI; treat none = 0)"]
    for t, nb, lo, hi, alln in zip(dc.thresholds, dc.net_benefit, dc.lower, dc.upper, dc.treat_all):
        lines.append(f"  threshold {t:6.1%}   model {nb:7.4f} [{lo:7.4f}, {hi:7.4f}]   treat all {alln:7.4f}")
    return lines


def _wrapped(title: str, items) -> list[str]:
    if not items:
        return []
    return ["", title] + [textwrap.fill(w, width=104, initial_indent="  - ", subsequent_indent="    ",
                                       break_on_hyphens=False) for w in items]


def full_lines(r) -> list[str]:
    """Every line: the estimates, calibration per bin, privacy, extras, the protocol's detail, warnings and notes."""
    pct = round(100 * r.level)
    lines = _head(r) + _headline(r, pct) + _calibration(r, pct) + _privacy(r)
    if r.heterogeneity is not None:
        lines += r.heterogeneity.summary_lines(pct)
    if r.decision_curve is not None:
        lines += _decision_curve(r.decision_curve, pct)
    for extra in (r.subgroups, r.comparison):
        if extra is not None:
            lines += extra.summary_lines(pct)
    if r.detail is not None:
        lines += [""] + r.detail.detail_lines(r)
    return lines + _wrapped("Warnings", r.warnings) + _wrapped("Notes (how the estimates were made)", r.notes)


#: The parts of this layout that the one-screen summary (:mod:`analyst.result.brief`) shows as they are.
head_lines = _head
