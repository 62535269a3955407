"""``dsroc recommend``: the (epsilon, delta) the simulation study recommends for a sensitivity."""

from __future__ import annotations

import dataclasses
import json
import math

from analyst.cli.common import report_failures

__all__ = ["add_recommend", "cmd_recommend"]


def _histogram_plan(args) -> int:
    """``recommend --protocol histogram``: the planned AUC interval width at each epsilon tried."""
    from analyst.recommend import histogram_width_plan

    missing = [f"--{k}" for k in ("patients", "events", "width") if getattr(args, k) is None]
    if missing:
        raise ValueError(f"{', '.join(missing)}: needed with --protocol histogram (the planned size and the widest "
                         "informative AUC interval)")
    plan = histogram_width_plan(args.patients, args.events, args.sites, args.epsilon or 0.1, args.width, auc=args.auc,
                                max_epsilon=args.max_epsilon, reps=args.reps)
    if args.json:
        print(json.dumps({**{k: v for k, v in dataclasses.asdict(plan).items() if k not in ("widths", "by_bins")},
                          "widths": [{"epsilon": e, "median_width": w} for e, w in plan.widths.items()],
                          "by_bins": [{"n_bins": b, "median_width": w} for b, w in plan.by_bins.items()]}, indent=2))
        return 0
    print(f"Histogram protocol (default quantile grid): median width of the AUC interval over {args.reps} simulated "
          f"validations of {args.patients} patients ({args.events} events, AUC {args.auc:g}) over {args.sites} sites, "
          f"at each epsilon tried (per site; at most {args.max_epsilon:g})")
    for e, w in plan.widths.items():
        print(f"  epsilon {e:>6g}   width {w:.3f}" + ("   <- smallest informative" if e == plan.needed_epsilon else ""))
    for b, w in plan.by_bins.items():
        print(f"  at epsilon {plan.epsilon:g} with n_bins={b}: width {w:.3f}")
    print(str(plan))
    return 0


def cmd_recommend(args) -> int:
    from analyst.recommend import recommend_settings

    if args.protocol == "histogram":
        return _histogram_plan(args)
    if args.sensitivity is None:
        raise ValueError("--sensitivity is needed with --protocol paper")

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
    return 0 if not args.federation or not info.failed else report_failures(info)



def add_recommend(sub) -> None:
    """The ``recommend`` subcommand's parser."""
    r = sub.add_parser(
        "recommend", help="list the (epsilon, delta) the simulation study recommends for a sensitivity",
        description="List the (epsilon, delta) settings that kept the ROC-GLM AUC within a tolerance of the "
                    "empirical AUC in every AUC bin of the simulation study, for the smallest studied Delta at "
                    "least the given one; most private first.")
    r.add_argument("--protocol", choices=("paper", "histogram"), default="paper",
                   help="paper (default): the (epsilon, delta) for a sensitivity; histogram: the epsilon whose AUC "
                        "interval is at most --width for --patients / --events over --sites")
    r.add_argument("--sensitivity", type=float, default=None, metavar="DELTA",
                   help="paper: the sites' l2-sensitivity (the largest over the sites; see 'dsroc validate' or describe)")
    r.add_argument("--patients", type=int, default=None, metavar="N", help="histogram: planned patients in all")
    r.add_argument("--events", type=int, default=None, metavar="E", help="histogram: planned events (positives)")
    r.add_argument("--sites", type=int, default=5, metavar="K", help="histogram: sites (default 5)")
    r.add_argument("--width", type=float, default=None, metavar="W",
                   help="histogram: the widest informative AUC interval (e.g. 0.1)")
    r.add_argument("--auc", type=float, default=0.75, metavar="A", help="histogram: the AUC to plan for (default 0.75)")
    r.add_argument("--epsilon", type=float, default=None, metavar="EPS",
                   help="histogram: the epsilon to start from (default 0.1: the smallest informative one is searched)")
    r.add_argument("--reps", type=int, default=10, metavar="R",
                   help="histogram: simulated validations per epsilon (default 10)")
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
    r.set_defaults(func=cmd_recommend)
