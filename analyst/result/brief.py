"""The one-screen summary of a validation result, what a clinician reads first: what was validated, one row per
headline estimate with its interval, privacy per site, each extra part in a line or two, warnings only when something
needs attention. Everything else is in ``summary(verbose=True)`` (``dsroc validate --verbose``) and ``report.json``."""

from __future__ import annotations

import math
import textwrap

from analyst.result.summary import fmt, full_lines, guarantee_text, head_lines, spent_at
from analyst.wording import plain

__all__ = ["BRIEF_LINES", "brief_lines", "estimate_row", "extra_lines", "plain", "summary_text", "wrap"]

#: Lines the brief summary of a validation without extra parts stays within (five sites, survival included).
BRIEF_LINES = 25
_WIDTH = 104
_LABEL = 26
def wrap(text: str, first: str = "  ", rest: str = "    ") -> list[str]:
    """``text`` wrapped to the summary's width, its first line indented by ``first``, the others by ``rest``."""
    return textwrap.wrap(text, width=_WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def _ci(value, lower, upper, pct: int) -> str:
    if not math.isfinite(value):
        return "not estimable"
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return f"{fmt(value, 3):>6}"
    return f"{fmt(value, 3):>6}   {pct}% CI [{fmt(lower, 3)}, {fmt(upper, 3)}]"


def estimate_row(label: str, value, lower, upper, pct: int, note: str = "") -> str:
    """``label  value   95% CI [lower, upper]   (note)``, three decimals; ``not estimable`` for a NaN value."""
    text = f"{label:<{_LABEL}} {_ci(value, lower, upper, pct)}"
    return text + (f"   ({note})" if note else "")


def _estimate(label: str, e, pct: int, note: str = "") -> str:
    if e is None:
        return f"{label:<{_LABEL}} not estimable"
    return estimate_row(label, e.value, e.lower, e.upper, pct, note)


def _estimates(r, pct: int) -> list[str]:
    short = len(r.auc_estimator) <= 16
    notes = ([] if short else [r.auc_estimator]) + ([] if r.test is None else [
        f"H0: AUC <= {r.test.a0:g} {'rejected' if r.test.reject else 'not rejected'}, one-sided level "
        f"{(1 - r.test.level) / 2:g}"])
    lines = [estimate_row(f"AUC ({r.auc_estimator})" if short else "AUC", r.auc, *r.auc_ci, pct, "; ".join(notes))]
    brief = getattr(r.detail, "brief_lines", None)
    if brief is not None:
        lines += brief(r, pct)
    if r.brier is not None:
        note = getattr(r.detail, "brier_note", None)
        lines.append(_estimate("Brier score", r.brier, pct, "" if note is None else note(r)))
    if r.confusion is not None:
        c = r.confusion
        lines.append(f"{'At threshold ' + format(c.threshold, 'g'):<{_LABEL}} sensitivity {fmt(c.sensitivity, 3)}, "
                     f"specificity {fmt(c.specificity, 3)}, PPV {fmt(c.ppv, 3)}, NPV {fmt(c.npv, 3)}")
    c = r.calibration
    if c is not None:
        lines += [_estimate("O/E", c.oe, pct, f"1 ideal; binned ICI {fmt(c.ici, 3)}, Emax {fmt(c.emax, 3)}"),
                  _estimate("calibration-in-the-large", c.citl, pct, "0 ideal"),
                  _estimate("calibration slope", c.slope, pct, "1 ideal; below 1: predictions too extreme")]
    return lines + wrap(f"intervals include {plain(r.auc_ci_includes)}")


def _heterogeneity(h, pct: int) -> list[str]:
    lines = []
    for p in (h.auc, h.oe):
        if p is None:
            continue
        pi = (f", {pct}% prediction interval for a new site [{p.prediction_lower:.3f}, {p.prediction_upper:.3f}]"
              if math.isfinite(p.prediction_lower) else "")
        lines.append(f"{p.statistic + ' pooled across sites':<{_LABEL}} {p.estimate:.3f} [{p.lower:.3f}, "
                     f"{p.upper:.3f}]{pi}; tau^2 {p.tau2:.2g}, I^2 {100 * p.i2:.0f}%")
    return lines


def _decision_curve(dc) -> list[str]:
    t = list(dc.thresholds)
    if not t:
        return []
    better = [x for x, nb, alln in zip(t, dc.net_benefit, dc.treat_all) if nb > max(alln, 0.0)]
    where = (", ".join(f"{x:.0%}" for x in better) if better else "none of them")
    return wrap(f"Decision curve at {len(t)} thresholds from {t[0]:.0%} to {t[-1]:.0%}: the model's net benefit "
                f"exceeds treating all and treating none at {where}", first="")


def _subgroups(g) -> list[str]:
    diffs = [d for d in g.differences if d.statistic == "AUC"]
    return [f"Subgroups by {g.column}: AUC {d.stratum} minus {d.reference} {d.difference:+.3f} "
            f"[{d.lower:+.3f}, {d.upper:+.3f}], p = {d.p_value:.2g}" for d in diffs] or [
        f"Subgroups by {g.column}: {len(g.strata)} strata (see the verbose summary)"]


def _comparison(c) -> list[str]:
    return wrap(f"Compared with {c.model_b} on the same patients: AUC difference {c.difference:+.3f} "
                f"[{c.lower:+.3f}, {c.upper:+.3f}], p = {c.p_value:.2g} (binned AUCs of one joint release, "
                f"{c.auc_a:.3f} against {c.auc_b:.3f}; this model's differs from its AUC above, which is estimated "
                "from the validation's own release)", first="")


def _privacy(r) -> list[str]:
    """Each site's noise, this validation's releases and what they compose to, and its budget spent: one line when
    every site says the same, else one row per site (the verbose text has the sensitivity rules and the budget's own
    delta)."""
    rows = {}
    for name, p in r.privacy.items():
        spent = spent_at(p)
        budget = f" of {p.budget_epsilon:g}" if spent != "-" and math.isfinite(p.budget_epsilon) else ""
        rows[name] = (f"{p.noise_sd:.4g}", f"{p.releases or '-'}", f"{p.epsilon:.4g}",
                      f"{spent}{budget}{' (repeated release, nothing charged)' if p.repeated else ''}")
    note = (["  note: a 'model' sensitivity is estimated from the site's data, not a formal bound"]
            if any(not p.formal_bound for p in r.privacy.values()) else [])
    if len(set(rows.values())) == 1 and len(rows) > 1:
        sd, releases, epsilon, spent = next(iter(rows.values()))
        sizes = [p.n for p in r.privacy.values()]
        return ["", *wrap(f"Privacy per site (all {len(rows)}, n {min(sizes):.0f} to {max(sizes):.0f}): noise SD {sd}, "
                          f"releases {releases}, epsilon {epsilon}; spent so far at delta {r.delta:g}: {spent}",
                          first="", rest="  "), *note]
    w = max([len("Privacy per site") - 2] + [len(n) for n in r.privacy])
    lines = ["", f"{'Privacy per site':<{w + 2}}  {'n':>7}  {'noise SD':<9} {'releases':>8}  {'epsilon':<8} spent so far "
                 f"at delta {r.delta:g}, of the budget"]
    for name, p in r.privacy.items():
        sd, releases, epsilon, spent = rows[name]
        lines.append(f"  {name:<{w}}  {p.n:>7.0f}  {sd:<9} {releases:>8}  {epsilon:<8} {spent}")
    return lines + note


def extra_lines(r) -> list[str]:
    """A line or two for each extra part a result holds: pooling across sites, decision curve, subgroups, comparison."""
    pct, extra = round(100 * r.level), []
    if r.heterogeneity is not None:
        extra += _heterogeneity(r.heterogeneity, pct)
    if r.decision_curve is not None:
        extra += _decision_curve(r.decision_curve)
    if r.subgroups is not None:
        extra += _subgroups(r.subgroups)
    if r.comparison is not None:
        extra += _comparison(r.comparison)
    return extra


def brief_lines(r) -> list[str]:
    """The lines of the one-screen summary (:data:`BRIEF_LINES` at most for a validation without extra parts)."""
    pct = round(100 * r.level)
    # the privacy line and what it covers in one paragraph: the head's two lines, wrapped together
    lines = (head_lines(r)[:3] + wrap(f"privacy: {guarantee_text(r)}; covered: {plain(r.guarantee)}") + [""]
             + _estimates(r, pct) + _privacy(r))
    extra = extra_lines(r)
    lines += ([""] + extra if extra else [])
    if r.warnings:
        lines += ["", "Warnings"] + [line for w in r.warnings for line in wrap(w, first="  - ")]
    return lines + ["More (every estimate, the calibration per bin, how each was made): dsroc validate --verbose, "
                    "summary(verbose=True), report.json"]


def summary_text(r, *, verbose: bool = False) -> str:
    """The summary of a :class:`analyst.ValidationResult`.

    By default one screen (:func:`brief_lines`): what was validated, one row per headline estimate with its interval,
    privacy per site, each extra part in a line or two, and warnings only when something needs attention.
    ``verbose`` (:func:`analyst.result.summary.full_lines`): every estimate with what its interval includes, the
    calibration per bin, the extras in full, the protocol's own detail, the warnings and the notes on how the
    estimates were made."""
    return "\n".join(full_lines(r) if verbose else brief_lines(r))
