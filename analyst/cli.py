"""The ``dsroc`` command: validate, describe, budget and the five-site GBSG2 demo."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

__all__ = ["main"]

_EPILOG = """\
Every site decides its own sensitivity and noise and checks each request against its policy and
privacy budget; the analyst only ever receives noisy scores and aggregates over at least q patients.
Documentation: docs/analyst.md."""


_PRINT_LOCK = threading.Lock()  # progress arrives from the fan-out threads


def _print_progress(step: str, site: str | None, message: str) -> None:
    where = f"[{site}]" if site else ""
    with _PRINT_LOCK:
        sys.stderr.write(f"  {step:<28} {where:<12} {message}\n")
        sys.stderr.flush()


def _load_model(path: str) -> dict:
    try:
        model = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--model file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--model file {path} is not valid JSON: {exc}") from None
    if not isinstance(model, dict):
        raise ValueError(f"--model file {path} must hold an object with link, intercept and coefficients")
    return model


def _options(args):
    """The protocol's options object from the validate flags (each flag named as an options field); a flag
    that only another protocol's options have, set away from its default, is an error."""
    from analyst.protocols import PROTOCOLS

    fields = {name: {f.name: f.default for f in dataclasses.fields(p.options_type)} for name, p in PROTOCOLS.items()}
    own = fields[args.protocol]
    foreign = sorted({k for other in fields.values() for k, d in other.items()
                      if k not in own and getattr(args, k, None) not in (None, d)})
    if foreign:
        from analyst.protocols.base import HISTOGRAM_ONLY

        flags = ", ".join("--" + k.replace("_", "-") for k in foreign)
        why = "; ".join(sorted({HISTOGRAM_ONLY[k] for k in foreign if k in HISTOGRAM_ONLY}))
        raise ValueError(f"{flags}: not an option of --protocol {args.protocol}" + (f" ({why})" if why else ""))
    return PROTOCOLS[args.protocol].options_type(**{k: getattr(args, k) for k in own if getattr(args, k, None) is not None})


def _cmd_validate(args) -> int:
    from analyst.federation import Federation
    from analyst.result.report import atomic_folder, write_report

    model = _load_model(args.model) if args.model else None
    # check the request and make the report folder first: bad input fails before any site spends budget
    from analyst.session import check_privacy_request

    check_privacy_request(epsilon=args.epsilon, delta=args.delta, sensitivity=args.sensitivity)
    options = _options(args)
    say = (lambda *a, **k: None) if args.quiet else print
    with atomic_folder(Path(args.out), force=args.force) as tmp:
        with Federation.from_file(args.federation) as fed:
            say(f"Validating on {len(fed.sites)} site{'s' if len(fed.sites) != 1 else ''}: {', '.join(fed.names)}",
                file=sys.stderr)
            started = time.perf_counter()
            progress = None if args.quiet else _print_progress
            res = fed.validate(args.dataset, args.outcome, score=args.score, model=model, epsilon=args.epsilon,
                               delta=args.delta, protocol=args.protocol, options=options, alpha=args.alpha,
                               progress=progress)
            elapsed = time.perf_counter() - started
        paths = write_report(res, tmp)
    say(res)
    say(f"\nvalidate took {elapsed:.2f} s; report written to {args.out}: " + ", ".join(p.name for p in paths.values()))
    return 0


#: Exit status when some sites answered and others failed (describe, budget).
EXIT_PARTIAL = 4

_BUDGET_NOTE = ("Each site composes every release of every protocol with one accountant (privacy-loss "
                "distributions; exact Gaussian DP while it has only paper-protocol releases) and answers how many "
                "more releases at (epsilon, delta) its budget accepts, per protocol it serves: one release is one "
                "validation. Releases held by validations in progress count as spent until used or expired.")


def _report_failures(answers) -> int:
    """Print a line per failed site; the exit status (0, EXIT_PARTIAL, or raise when no site answered)."""
    answers.raise_if_none()
    for site, exc in answers.failed.items():
        print(f"{site}: FAILED ({exc.code.name}): {exc.message}")
    if answers.failed:
        print(f"partial answer: {len(answers)} of {len(answers) + len(answers.failed)} sites answered", file=sys.stderr)
    return EXIT_PARTIAL if answers.failed else 0


def _json_with_failures(answers) -> str:
    out = dict(answers)
    out.update({site: {"error": {"code": e.code.name, "message": e.message}} for site, e in answers.failed.items()})
    return json.dumps(out, indent=2)


def _cmd_describe(args) -> int:
    from analyst.federation import Federation

    with Federation.from_file(args.federation) as fed:
        info = fed.describe(epsilon=args.epsilon, delta=args.delta)
    if args.json:
        info.raise_if_none()
        print(_json_with_failures(info))
        return EXIT_PARTIAL if info.failed else 0
    for site, d in info.items():
        p = d.get("policy", {})
        print(f"{site} ({d.get('site_name', '')}, api {d.get('api_version', '')})")
        print(f"  policy: q = {p.get('privacy_level')}, per release epsilon <= {p.get('max_epsilon')}, "
              f"delta <= {p.get('max_delta')}; budget ({p.get('budget_epsilon')}, {p.get('budget_delta')}); "
              f"sensitivity rule '{p.get('sensitivity_rule')}'"
              + (f"; thresholds and bin edges on a lattice of {p['threshold_steps']} steps of the score range"
                 if p.get("threshold_steps") else ""))
        if p.get("strata"):  # --strata COLUMN: the columns and cut points this site releases subgroups of
            print("  strata (--strata): " + "; ".join(f"{s['column']} cut at {s['cuts']}" for s in p["strata"])
                  + f"; at most {p.get('histogram_max_cells')} cells per class")
        for ds in d.get("datasets", []):
            b = ds.get("budget", {})
            cols = ", ".join(c["name"] for c in ds.get("columns", []))
            print(f"  dataset '{ds['name']}': outcome {ds.get('outcome_columns')}, scores {ds.get('score_columns')}, "
                  f"rule '{ds.get('sensitivity_rule')}'")
            print(f"    columns: {cols}")
            print(f"    budget: spent epsilon {b.get('epsilon_spent', 0):.3g} of {b.get('budget_epsilon')} at delta "
                  f"{b.get('budget_delta')} ({b.get('releases', 0)} releases{_held(b)}); validations left at "
                  f"(epsilon {args.epsilon:g}, delta {args.delta:g}): {_left_text(b)}")
    return _report_failures(info)


def _left(b: dict) -> dict:
    """``{protocol: count text}`` of a budget answer's ``left`` (the site's accountant; "-" when refused)."""
    out = {}
    for x in b.get("left", []):
        n = int(x.get("releases", 0))
        out[x["query"]["protocol"]] = "-" if x.get("refused") else f"{n}+" if x.get("at_least") else str(n)
    return out


def _left_text(b: dict) -> str:
    left = _left(b)
    return ", ".join(f"{p} {n}" for p, n in left.items()) if left else "not reported (a site from before)"


def _held(b: dict) -> str:
    n = int(b.get("reservations", 0))
    return f", {n} held by validations in progress" if n else ""


def budget_rows(answers, *, epsilon: float, delta: float) -> list[dict]:
    """Each site's budget in the analyst's terms: epsilon spent at the budget's delta (and at ``delta`` while
    the history is exact Gaussian DP), and how many more validations at (``epsilon``, ``delta``) fit, per
    protocol, as the site's accountant counts them (``left``; "-" where the site refuses such a release)."""
    import dsroc

    rows = []
    for site, b in answers.items():
        mu_spent = b.get("mu_spent", 0.0)
        exact = b.get("accounting", "").startswith("gaussian") or not b.get("releases", 0)
        rows.append({
            "site": site, "releases": int(b.get("releases", 0)), "held": int(b.get("reservations", 0)),
            "budget_epsilon": b.get("budget_epsilon"), "budget_delta": b.get("budget_delta"),
            "epsilon_spent_at_request_delta": (dsroc.gdp_epsilon(mu_spent, delta) if mu_spent > 0 else 0.0)
            if exact else None,
            "epsilon_spent_at_budget_delta": b.get("epsilon_spent", 0.0), "delta_spent": b.get("delta_spent", 0.0),
            "validations_left": _left(b),
            "refused": {x["query"]["protocol"]: x["refused"] for x in b.get("left", []) if x.get("refused")},
        })
    return rows


def _cmd_budget(args) -> int:
    from analyst.federation import Federation

    with Federation.from_file(args.federation) as fed:
        info = fed.budget(args.dataset, epsilon=args.epsilon, delta=args.delta)
    if args.json:
        info.raise_if_none()
        print(_json_with_failures(info))
        return EXIT_PARTIAL if info.failed else 0
    rows = budget_rows(info, epsilon=args.epsilon, delta=args.delta)
    print(f"Privacy budget of dataset '{args.dataset}' per site; validations left at (epsilon, delta) = "
          f"({args.epsilon:g}, {args.delta:g}) (--epsilon, --delta):")
    print(f"  {'site':<12} {'releases':>8} {'held':>4} {'eps spent @ delta':>18} {'eps spent @ budget delta':>25} "
          f"{'budget (eps, delta)':>20}  validations left")
    for r in rows:
        at_request = r["epsilon_spent_at_request_delta"]
        print(f"  {r['site']:<12} {r['releases']:>8} {r['held']:>4} "
              f"{format(at_request, '.3g') if at_request is not None else '-':>9} @ {args.delta:<6g} "
              f"{r['epsilon_spent_at_budget_delta']:>15.3g} @ {r['budget_delta']:<7g} "
              f"{'(' + format(r['budget_epsilon'], 'g') + ', ' + format(r['budget_delta'], 'g') + ')':>20}  "
              + (", ".join(f"{p} {n}" for p, n in r["validations_left"].items()) or "not reported"))
        for protocol, why in r["refused"].items():
            print(f"  {'':<12} {protocol}: {why}")
    print(textwrap.fill(_BUDGET_NOTE, width=104, initial_indent="  ", subsequent_indent="  "))
    return _report_failures(info)


def _cmd_recommend(args) -> int:
    from analyst.recommend import recommend_settings

    max_eps, max_delta, limits = args.max_epsilon, args.max_delta, "the default site policy"
    if args.federation:
        from analyst.federation import Federation

        with Federation.from_file(args.federation) as fed:
            info = fed.describe().raise_if_none()
        policies = [d.get("policy", {}) for d in info.values()]
        max_eps = min(p.get("max_epsilon", float("inf")) for p in policies)
        max_delta = min(p.get("max_delta", 1.0) for p in policies)
        limits = f"the policies of {', '.join(info)}"
    settings = recommend_settings(args.sensitivity, tolerance=args.tolerance, table=args.table,
                                  max_epsilon=max_eps, max_delta=max_delta, min_corrected_coverage=args.min_coverage)
    if args.json:
        print(json.dumps([dataclasses.asdict(s) for s in settings], indent=2))
        return 0
    source = args.table or "the packaged protocol-mode study (the deployed procedure, 10 000 replications per setting)"
    print(f"(epsilon, delta) recommended for Delta = {args.sensitivity:g}: settings studied at Delta = "
          f"{settings[0].studied_sensitivity:g} whose mean |AUC_emp - AUC_ROC-GLM| stayed within "
          f"{args.tolerance:g} in every empirical-AUC bin; source: {source}; only those that {limits} accepts "
          f"(epsilon <= {max_eps:g}, delta <= {max_delta:g} per release). Most private first. Corrected-CI coverage: "
          "the smallest share of replications in which the noise-corrected AUC's CI held the pooled AUC, over the "
          "score shapes and n = 10^3 ... 10^6 of 'python -m simulations paper-coverage'.")
    print(f"  {'epsilon':>7} {'delta':>8} {'tau':>8} {'worst-bin MAE':>14} {'worst-bin delta-ci':>19}  "
          f"{'CI within tolerance':>19}  corrected-CI coverage")
    for r in settings:
        cover = "not studied" if math.isnan(r.corrected_coverage) else f"{r.corrected_coverage:.2f}"
        print(f"  {r.epsilon:>7g} {r.delta:>8g} {r.tau:>8.4f} {r.worst_bin_mae:>14.4f} {r.worst_bin_delta_ci:>19.4f}  "
              f"{'yes' if r.ci_within_tolerance else 'no':>19}  {cover}")
    return 0 if not args.federation or not info.failed else _report_failures(info)


def _cmd_demo(args) -> int:
    from analyst.demo import run_demo

    return run_demo(out=args.out, json_path=args.json, n_patients=args.n_patients, epsilon=args.epsilon,
                    delta=args.delta, seed=args.seed, progress=None if args.quiet else _print_progress)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dsroc", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="Validate a binary prediction model on data held by several hospitals (distributed\n"
                    "ROC-GLM with differential privacy): AUC with CI, ROC curve, Brier score, calibration.")
    from site_node.cli import package_version

    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from analyst.result.report import REPORT_FILES

    files = ", ".join(REPORT_FILES.values())
    v = sub.add_parser("validate", help="run a distributed validation and write a report folder",
                       description=f"Run the distributed validation over the sites of a federation file and write "
                                   f"{files} to --out, the same files for every protocol (calibration.png only when "
                                   "a calibration curve could be estimated; forest.png with --by-site, "
                                   "decision_curve.png with --decision-curve, subgroups.png with --strata, "
                                   "comparison.png with --compare). The summary and report warn when "
                                   "(epsilon, delta) is not among the settings the simulation study recommends "
                                   "for the sites' Delta (see 'dsroc recommend'). Exit status 0 on success, 2 for "
                                   "bad input, 3 when a site refused or failed.")
    v.add_argument("--federation", required=True, metavar="F", help="federation TOML file (sites, addresses, tokens, CA)")
    v.add_argument("--dataset", required=True, metavar="NAME", help="dataset name as the sites declare it")
    v.add_argument("--outcome", required=True, metavar="Y", help="outcome column (labels 0/1)")
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
                        "the nearest count all sites allow); paper: calibration bins on [0,1] (default 10)")
    v.add_argument("--a0", type=float, default=None, help="also test H0: AUC <= a0 (every protocol)")
    h = v.add_argument_group("histogram and secagg protocols (HistogramOptions, SecAggOptions; an error with "
                             "--protocol paper)")
    h.add_argument("--spacing", choices=("quantile", "equal", "logit"), default=None,
                   help="grid: quantile (the default) puts the bins at the quantiles of a first release on a fine "
                        "grid (a tenth of the budget; histogram: of both classes, balanced); equal or logit use one "
                        "fixed grid on the score range")
    ho = v.add_argument_group("histogram protocol only (HistogramOptions)")
    ho.add_argument("--by-site", action="store_true",
                    help="also each site's AUC and O/E from its own release, pooled by random effects (REML, "
                         "Hartung-Knapp): tau^2, I^2, a 95%% prediction interval for a new site, forest.png; no "
                         "further release")
    ho.add_argument("--decision-curve", action="store_true",
                    help="also the net benefit at the grid's edges against treat all / treat none, with intervals "
                         "including the noise (decision_curve.png); use --n-bins / --spacing logit to resolve the "
                         "thresholds you need")
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
    v.set_defaults(func=_cmd_validate)

    d = sub.add_parser("describe", help="show each site's datasets, policy and budget",
                       description="Show each site's datasets (columns, outcome and score columns), its privacy "
                                   "policy and remaining budget, with how many more validations at (--epsilon, "
                                   "--delta) fit per protocol by each site's accountant. Reveals no patient counts. "
                                   "Sites that fail get a line each; exit 4 when only some sites answered, 3 when "
                                   "none did.")
    d.add_argument("--federation", required=True, metavar="F", help="federation TOML file")
    d.add_argument("--epsilon", type=float, default=5.0, metavar="EPS",
                   help="epsilon of the validations you plan (default 5): says how many more fit, per protocol")
    d.add_argument("--delta", type=float, default=0.01, metavar="DELTA",
                   help="delta of the validations you plan (default 0.01)")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    d.set_defaults(func=_cmd_describe)

    b = sub.add_parser("budget", help="show each site's spent and remaining privacy budget for a dataset",
                       description="Spent and remaining privacy budget per site, in epsilon at the delta of your "
                                   "requests and at the budget's delta, and how many more validations at "
                                   "(--epsilon, --delta) fit per protocol, counted by each site's accountant. Sites that fail get a line each; exit 4 when only some "
                                   "sites answered, 3 when none did.")
    b.add_argument("--federation", required=True, metavar="F", help="federation TOML file")
    b.add_argument("--dataset", required=True, metavar="NAME", help="dataset name")
    b.add_argument("--epsilon", type=float, default=5.0, metavar="EPS",
                   help="epsilon of the requests you make (default 5): says how many more validations fit")
    b.add_argument("--delta", type=float, default=0.01, metavar="DELTA",
                   help="delta of the requests you make (default 0.01): the spent budget is also shown at it")
    b.add_argument("--json", action="store_true", help="print JSON instead of text")
    b.set_defaults(func=_cmd_budget)

    r = sub.add_parser(
        "recommend", help="list the (epsilon, delta) the simulation study recommends for a sensitivity",
        description="List the (epsilon, delta) settings that kept the ROC-GLM AUC within a tolerance of the "
                    "empirical AUC in every AUC bin of the simulation study, for the smallest studied Delta at "
                    "least the given one; most private first.")
    r.add_argument("--sensitivity", type=float, required=True, metavar="DELTA",
                   help="the sites' l2-sensitivity (the largest over the sites; see 'dsroc validate' or describe)")
    r.add_argument("--tolerance", type=float, default=0.015, metavar="T",
                   help="MAE tolerance of the AUC (default 0.015; the packaged table has 0.01, 0.015, 0.02)")
    r.add_argument("--table", default=None, metavar="PATH",
                   help="a recommended.csv of another 'python -m simulations run' (default: the packaged study)")
    r.add_argument("--federation", default=None, metavar="F",
                   help="keep only settings every site's policy accepts (asks the sites for their policies)")
    r.add_argument("--max-epsilon", type=float, default=10.0, metavar="EPS",
                   help="without --federation: largest epsilon per release to list (default 10, the default policy)")
    r.add_argument("--max-delta", type=float, default=0.01, metavar="DELTA",
                   help="without --federation: largest delta per release to list (default 0.01, the default policy)")
    r.add_argument("--min-coverage", type=float, default=None, metavar="C",
                   help="keep only settings whose noise-corrected CI held the pooled AUC in at least this share of the "
                        "coverage study's replications, for every score shape and n (e.g. 0.93)")
    r.add_argument("--json", action="store_true", help="print JSON instead of text")
    r.set_defaults(func=_cmd_recommend)

    m = sub.add_parser(
        "demo", help="five local TLS site daemons on GBSG2: distributed vs pooled results",
        description="Load GBSG2 (lifelines), fit a logistic model for 2-year recurrence-free survival on a 60% "
                    "training split, split the rest over five sites, start five dsroc-site daemons with TLS on "
                    "loopback, validate through the network and print the results beside the pooled truth.")
    m.add_argument("--out", default=None, metavar="DIR",
                   help="working folder for site data, certificates, configs, logs and the report "
                        "(default: a temporary folder, removed at the end with its keys and token)")
    m.add_argument("--json", default=None, metavar="PATH", help="also write the report JSON (with 'pooled') here")
    m.add_argument("--n-patients", type=int, default=None, metavar="N",
                   help="use a random subset of N of the 686 patients (default: all; each site needs at least "
                        "q = 5 patients of each class, so N of about 400 or more)")
    m.add_argument("--epsilon", type=float, default=5.0, metavar="EPS", help="epsilon per release (default 5, as in the paper)")
    m.add_argument("--delta", type=float, default=0.01, metavar="DELTA", help="delta per release (default 0.01, as in the paper)")
    m.add_argument("--seed", type=int, default=2024, metavar="S", help="seed of the split (default 2024)")
    m.add_argument("--quiet", action="store_true", help="no progress messages")
    m.set_defaults(func=_cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dsroc`` console script; returns the exit status."""
    from analyst.connection import SiteError

    args = _parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            # fitting warnings are on the result and printed in its summary; no second, source-line copy
            warnings.simplefilter("ignore", RuntimeWarning)
            return args.func(args)
    except SiteError as exc:
        print(f"dsroc: {exc}", file=sys.stderr)
        return 3
    except (ValueError, OSError) as exc:
        print(f"dsroc: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
