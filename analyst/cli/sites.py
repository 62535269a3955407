"""``dsroc describe`` and ``dsroc budget``: each site's datasets, policy and budget, and how many validations fit."""

from __future__ import annotations

import textwrap

from analyst.cli.common import EXIT_PARTIAL, json_with_failures, report_failures

__all__ = ["BUDGET_NOTE", "add_budget", "add_describe", "budget_rows", "cmd_budget", "cmd_describe"]

BUDGET_NOTE = ("Each site composes every release of every protocol with one accountant (privacy-loss "
                "distributions; exact Gaussian DP while it has only paper-protocol releases) and answers how many "
                "more releases at (epsilon, delta) its budget accepts, per protocol it serves: one release is one "
                "validation. Releases held by validations in progress count as spent until used or expired.")


def cmd_describe(args) -> int:
    from analyst.federation import Federation

    with Federation.from_file(args.federation) as fed:
        info = fed.describe(epsilon=args.epsilon, delta=args.delta)
    if args.json:
        info.raise_if_none()
        print(json_with_failures(info))
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
        if p.get("survival_time_edges"):  # --time: the public time edges a survival release may use
            edges = ", ".join(f"{e:g}" for e in p["survival_time_edges"])
            uno = ((f"; Uno's C at tau <= {p['survival_max_tau']:g}" if p.get("survival_max_tau") else "")
                   + (f"; Uno's C where the censoring survival >= {p['survival_min_censoring_survival']:g}"
                      if p.get("survival_min_censoring_survival") else ""))
            print(f"  survival (--time): time edges {edges}; at most {p.get('survival_max_time_bins')} time bins{uno}")
        for ds in d.get("datasets", []):
            b = ds.get("budget", {})
            cols = ", ".join(c["name"] for c in ds.get("columns", []))
            print(f"  dataset '{ds['name']}': outcome {ds.get('outcome_columns')}, scores {ds.get('score_columns')}, "
                  f"rule '{ds.get('sensitivity_rule')}'"
                  + (f", time columns {ds['time_columns']}" if ds.get("time_columns") else ""))
            print(f"    columns: {cols}")
            print(f"    budget: spent epsilon {b.get('epsilon_spent', 0):.3g} of {b.get('budget_epsilon')} at delta "
                  f"{b.get('budget_delta')} ({b.get('releases', 0)} releases{held_text(b)}); validations left at "
                  f"(epsilon {args.epsilon:g}, delta {args.delta:g}): {left_text(b)}")
    return report_failures(info)


def left_counts(b: dict) -> dict:
    """``{protocol: count text}`` of a budget answer's ``left`` (the site's accountant; "-" when refused)."""
    out = {}
    for x in b.get("left", []):
        n = int(x.get("releases", 0))
        out[x["query"]["protocol"]] = "-" if x.get("refused") else f"{n}+" if x.get("at_least") else str(n)
    return out


def left_text(b: dict) -> str:
    left = left_counts(b)
    return ", ".join(f"{p} {n}" for p, n in left.items()) if left else "not reported (a site from before)"


def held_text(b: dict) -> str:
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
            "validations_left": left_counts(b),
            "refused": {x["query"]["protocol"]: x["refused"] for x in b.get("left", []) if x.get("refused")},
        })
    return rows


def cmd_budget(args) -> int:
    from analyst.federation import Federation

    with Federation.from_file(args.federation) as fed:
        info = fed.budget(args.dataset, epsilon=args.epsilon, delta=args.delta)
    if args.json:
        info.raise_if_none()
        print(json_with_failures(info))
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
    print(textwrap.fill(BUDGET_NOTE, width=104, initial_indent="  ", subsequent_indent="  "))
    return report_failures(info)



def add_describe(sub) -> None:
    """The ``describe`` subcommand's parser."""
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
    d.set_defaults(func=cmd_describe)


def add_budget(sub) -> None:
    """The ``budget`` subcommand's parser."""
    b = sub.add_parser("budget", help="show each site's spent and remaining privacy budget for a dataset",
                       description="Spent and remaining privacy budget per site, in epsilon at the delta of your "
                                   "requests and at the budget's delta, and how many more validations at "
                                   "(--epsilon, --delta) fit per protocol, counted by each site's accountant. Sites that "
                                   "fail get a line each; exit 4 when only some sites answered, 3 when none did.")
    b.add_argument("--federation", required=True, metavar="F", help="federation TOML file")
    b.add_argument("--dataset", required=True, metavar="NAME", help="dataset name")
    b.add_argument("--epsilon", type=float, default=5.0, metavar="EPS",
                   help="epsilon of the requests you make (default 5): says how many more validations fit")
    b.add_argument("--delta", type=float, default=0.01, metavar="DELTA",
                   help="delta of the requests you make (default 0.01): the spent budget is also shown at it")
    b.add_argument("--json", action="store_true", help="print JSON instead of text")
    b.set_defaults(func=cmd_budget)
