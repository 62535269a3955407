"""``dsroc validate``: its flags, the protocol's options from them, and the run that writes the report folder."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from analyst.cli.common import print_progress

__all__ = ["add_validate", "cmd_validate", "load_model", "protocol_options"]


def load_model(path: str) -> dict:
    """The GLM of a ``--model`` JSON file (a ValueError naming the file when it is missing or malformed)."""
    try:
        model = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--model file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--model file {path} is not valid JSON: {exc}") from None
    if not isinstance(model, dict):
        raise ValueError(f"--model file {path} must hold an object with link, intercept and coefficients")
    return model


def _float_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _foreign(args, own: dict, fields: dict) -> list[str]:
    """The flags of options that ``own`` does not have, set away from their defaults."""
    return sorted({k for other in fields.values() for k, d in other.items()
                   if k not in own and getattr(args, k, None) not in (None, d)})


def protocol_options(args):
    """The protocol's options object from the validate flags (each flag named as an options field); a flag
    that only another protocol's options have, set away from its default, is an error. With ``--time`` the
    survival validation's options (:class:`analyst.protocols.histogram.survival.SurvivalOptions`)."""
    from analyst.protocols import PROTOCOLS

    fields = {name: {f.name: f.default for f in dataclasses.fields(p.options_type)} for name, p in PROTOCOLS.items()}
    if args.time is not None:
        from analyst.protocols.histogram.survival import SurvivalOptions

        own = {f.name: f.default for f in dataclasses.fields(SurvivalOptions)} | {"by_site": False}
        foreign = _foreign(args, own, fields)
        if foreign:
            raise ValueError(f"{', '.join('--' + k.replace('_', '-') for k in foreign)}: not an option of a survival "
                             "validation (--time)")
        if args.horizon is None:
            raise ValueError("--horizon is required with --time (the time the model's risks are predicted at)")
        given = {k: getattr(args, k) for k in ("n_bins", "time_edges", "tau", "auc_times")
                 if getattr(args, k, None) is not None}
        return SurvivalOptions(horizon=args.horizon, **given)
    for flag in ("horizon", "time_edges", "tau", "auc_times"):
        if getattr(args, flag, None) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} applies to a survival validation only: give --time too")
    own = fields[args.protocol]
    foreign = _foreign(args, own, fields)
    if foreign:
        from analyst.protocols.base import HISTOGRAM_ONLY

        flags = ", ".join("--" + k.replace("_", "-") for k in foreign)
        why = "; ".join(sorted({HISTOGRAM_ONLY[k] for k in foreign if k in HISTOGRAM_ONLY}))
        raise ValueError(f"{flags}: not an option of --protocol {args.protocol}" + (f" ({why})" if why else ""))
    return PROTOCOLS[args.protocol].options_type(**{k: getattr(args, k) for k in own if getattr(args, k, None) is not None})


def cmd_validate(args) -> int:
    """Run the validation over the federation and write its report folder (nothing is left on failure)."""
    from analyst.federation import Federation
    from analyst.result.report import atomic_folder, write_report

    model = load_model(args.model) if args.model else None
    # check the request and make the report folder first: bad input fails before any site spends budget
    from analyst.session import check_privacy_request

    check_privacy_request(epsilon=args.epsilon, delta=args.delta, sensitivity=args.sensitivity)
    options = protocol_options(args)
    say = (lambda *a, **k: None) if args.quiet else print
    with atomic_folder(Path(args.out), force=args.force) as tmp:
        with Federation.from_file(args.federation) as fed:
            say(f"Validating on {len(fed.sites)} site{'s' if len(fed.sites) != 1 else ''}: {', '.join(fed.names)}",
                file=sys.stderr)
            started = time.perf_counter()
            progress = None if args.quiet else print_progress
            try:
                res = fed.validate(args.dataset, args.outcome, score=args.score, model=model, epsilon=args.epsilon,
                                   delta=args.delta, protocol=args.protocol, options=options, alpha=args.alpha,
                                   progress=progress, time=args.time)
            except KeyboardInterrupt as exc:
                if str(exc):  # interrupted in the sites' session: it says what they charged
                    raise
                raise KeyboardInterrupt("nothing was charged at any site") from None
            elapsed = time.perf_counter() - started
        paths = write_report(res, tmp)
    say(res)
    say(f"\nvalidate took {elapsed:.2f} s; report written to {args.out}: " + ", ".join(p.name for p in paths.values()))
    return 0



def add_validate(sub) -> None:
    """The ``validate`` subcommand's parser."""
    from analyst.result.report import REPORT_FILES

    files = ", ".join(REPORT_FILES.values())
    v = sub.add_parser("validate", help="run a distributed validation and write a report folder",
                       description=f"Run the distributed validation over the sites of a federation file and write "
                                   f"{files} to --out, the same files for every protocol (calibration.png only when "
                                   "a calibration curve could be estimated; forest.png with --by-site, "
                                   "decision_curve.png with --decision-curve, subgroups.png with --strata, "
                                   "comparison.png with --compare, survival.png with --time). The summary and report "
                                   "warn when "
                                   "(epsilon, delta) is not among the settings the simulation study recommends "
                                   "for the sites' Delta (see 'dsroc recommend'). Exit status 0 on success, 2 for "
                                   "bad input, 3 when a site refused or failed, 130 when interrupted (Ctrl-C; the "
                                   "message says what each site charged so far).")
    v.add_argument("--federation", required=True, metavar="F", help="federation TOML file (sites, addresses, tokens, CA)")
    v.add_argument("--dataset", required=True, metavar="NAME", help="dataset name as the sites declare it")
    v.add_argument("--outcome", required=True, metavar="Y",
                   help="outcome column (labels 0/1); with --time the event column (1 event, 0 censored)")
    src = v.add_mutually_exclusive_group(required=True)
    src.add_argument("--score", metavar="S", help="a score column of the dataset (probabilities)")
    src.add_argument("--model", metavar="M.json",
                     help='a GLM as JSON: {"link": "logit", "intercept": b0, "coefficients": {"col": b, ...}}')
    v.add_argument("--epsilon", type=float, required=True, metavar="EPS", help="epsilon of each site's release")
    v.add_argument("--delta", type=float, required=True, metavar="DELTA", help="delta of each site's release")
    v.add_argument("--out", required=True, metavar="DIR",
                   help="report folder: written to a temporary folder beside it and renamed at the end (nothing is "
                        "left on failure); a non-empty folder is refused without --force")
    v.add_argument("--protocol", choices=("histogram", "secagg", "paper"), default="histogram",
                   help="histogram (default): one differentially private histogram release per site, everything "
                   "else post-processing; secagg: the sites' histograms summed by secure aggregation (the analyst "
                   "sees only the sum, which carries one release's noise); paper: the paper's protocol (noisy "
                   "scores, then exact q-protected answers)")
    v.add_argument("--alpha", type=float, default=0.05, metavar="A",
                   help="1 - confidence level of every interval (default 0.05)")
    v.add_argument("--n-bins", type=int, default=None, metavar="N",
                   help="histogram: bins of the grid (default: with the quantile grid chosen from its first release's "
                        "class sizes and the noise, 5 to 10; else the simulation study's count for the noise level, or "
                        "the nearest count all sites allow); paper: calibration bins on [0,1] (default 10); survival (--time): "
                        "equal-width score bins on [0, 1] (default 10)")
    v.add_argument("--a0", type=float, default=None, help="also test H0: AUC <= a0 (every protocol)")
    h = v.add_argument_group("histogram and secagg protocols (HistogramOptions, SecAggOptions; an error with "
                             "--protocol paper)")
    h.add_argument("--spacing", choices=("quantile", "equal", "logit"), default=None,
                   help="grid: quantile (the default) puts the bins at the quantiles of a first release of both classes "
                        "on a fine grid (histogram: a fifth of epsilon with the default score sums; secagg: a tenth of "
                        "the budget's zCDP); equal or logit use one fixed grid on the score range")
    ho = v.add_argument_group("histogram protocol only (HistogramOptions)")
    ho.add_argument("--by-site", action="store_true",
                    help="also each site's AUC and O/E from its own release, pooled by random effects (REML, "
                         "Hartung-Knapp): tau^2, I^2, a 95%% prediction interval for a new site, forest.png; no "
                         "further release")
    ho.add_argument("--decision-curve", action="store_true",
                    help="also the net benefit at the grid's edges against treat all / treat none, with intervals "
                         "including the noise (decision_curve.png); --thresholds puts the thresholds you need on "
                         "the grid")
    ho.add_argument("--thresholds", type=_float_list, default=None, metavar="T1,T2,...",
                    help="decision thresholds (risks) put on the quantile grid as bin edges exactly, beside its quantile "
                         "edges: net benefit, the confusion table and calibration from one release, and the decision "
                         "curve (decision_curve.png) at these thresholds; each an edge of a grid every site allows (e.g. "
                         "multiples of 0.005 under the default policy), refused before any site is charged otherwise")
    ho.add_argument("--max-auc-width", type=float, default=None, metavar="W",
                    help="with --planned: refuse, before anything is held or charged, a request whose AUC interval at "
                         "--epsilon would be wider than W for the planned size, naming the epsilon that would do "
                         "(simulated validations through the default protocol; dsroc recommend --protocol histogram)")
    ho.add_argument("--planned", type=_float_list, default=None, metavar="N,E[,AUC]",
                    help="the expected patients N and events E (and the AUC to plan for, default 0.75) for "
                         "--max-auc-width")
    ho.add_argument("--strata", default=None, metavar="COLUMN",
                    help="also every statistic per stratum of COLUMN and the differences between strata "
                         "(subgroups.png): one more release per site at --epsilon/--delta on the validation's grid, "
                         "split at the cut points each site's policy lists for COLUMN (policy.strata)")
    ho.add_argument("--compare", default=None, metavar="SCORE2",
                    help="also compare with a second score column on the same patients: each model's AUC, the "
                         "paired difference with its CI and the test of no difference (comparison.png); one more "
                         "release per site at --epsilon/--delta, a joint 2-D histogram of both scores")
    ho.add_argument("--skip-refusing-sites", "--skip-refusing", action="store_true",
                    help="go on without a site that refuses because a class holds fewer than its q patients "
                         "(PERMISSION_DENIED, privacy level), decided before any site is charged; the report names "
                         "each site left out and why, and every estimate is of the other sites' patients")
    sa = v.add_argument_group("secagg protocol (SecAggOptions)")
    sa.add_argument("--colluders", type=int, default=None, metavar="T",
                    help="size the noise shares for coalitions of T sites with the analyst (default: the largest "
                         "any site's policy requires)")
    sa.add_argument("--dropouts", type=int, default=0, metavar="D",
                    help="go on without up to D sites that fail to mask (their pairwise masks removed by the "
                         "survivors); shares sized for sites - D - T honest sites, each round charged anew (default 0: "
                         "a dropout aborts the round, nothing is charged)")
    sv = v.add_argument_group(
        "survival outcome (SurvivalOptions; histogram protocol, or secagg for counts summed securely)",
        "With --time the sites release one (time bin x status x score bin) histogram each and every patient counts, "
        "censored or not: AUC(t) by IPCW, Harrell's and Uno's C, Brier(t), integrated and scaled Brier, O/E and "
        "observed (Kaplan-Meier) vs predicted risk per risk group, calibration intercept and slope at the horizon, "
        "per-site estimates pooled by random effects, and survival.png. The score must be the predicted risk of an "
        "event by the horizon. Competing risks are not handled.")
    sv.add_argument("--time", default=None, metavar="COL",
                    help="follow-up time column the sites declare (policy: time_columns); --outcome is then the event "
                         "indicator")
    sv.add_argument("--horizon", type=float, default=None, metavar="T",
                    help="the horizon of the predicted risks, in the time column's unit (e.g. 730 days); required "
                         "with --time")
    sv.add_argument("--time-edges", type=_float_list, default=None, metavar="E1,E2,...",
                    help="interior time edges of the release, each one of every site's survival_time_edges (default: "
                         "the edges the sites share, thinned to the fewest survival_max_time_bins, keeping the "
                         "horizon)")
    sv.add_argument("--tau", type=float, default=None, metavar="T",
                    help="truncation time of Uno's C (default: the horizon, or the smallest survival_max_tau of the "
                         "sites' policies when the horizon lies beyond it); beyond a site's survival_max_tau: refused "
                         "before anything is held. Where the released censoring survival falls below a site's "
                         "survival_min_censoring_survival, Uno's C is truncated earlier (the report says so)")
    sv.add_argument("--auc-times", type=_float_list, default=None, metavar="T1,T2,...",
                    help="times of the AUC(t) curve (report.json detail.auc_curve, survival.png), e.g. 365,730,1095: each positive "
                         "and at most the release's last finite time edge, checked before anything is held; a time "
                         "inside a time bin counts that bin's patients as event-free (default: up to 8 of the grid's "
                         "times, spread evenly)")
    pp = v.add_argument_group("paper protocol (PaperOptions; an error with --protocol histogram)")
    pp.add_argument("--grid", type=int, default=None, metavar="M",
                    help="ROC-GLM grid: linspace(0,1,M) without end points (default 30 -> 28 thresholds)")
    pp.add_argument("--ci-method", choices=("logit", "wald"), default="logit",
                    help="logit: the logit-scale DeLong CI (default); wald: the AUC-scale one (pROC's)")
    pp.add_argument("--threshold", type=float, default=None, metavar="T",
                    help="also report the confusion matrix at this threshold (score >= T predicts 1); sites accept "
                         "only thresholds on their lattice, e.g. multiples of 0.01 (see 'dsroc describe')")
    pp.add_argument("--sensitivity", type=float, default=None, metavar="SENS",
                    help="ask the sites for a larger sensitivity Delta than their rules give (never smaller)")
    v.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    v.add_argument("--quiet", action="store_true", help="print nothing (errors still go to stderr)")
    v.set_defaults(func=cmd_validate)
