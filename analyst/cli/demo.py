"""``dsroc demo``: five local TLS site daemons on GBSG2, validated through the network."""

from __future__ import annotations

from analyst.cli.common import progress_printer

__all__ = ["add_demo", "cmd_demo"]


def cmd_demo(args) -> int:
    from analyst.demo import run_demo

    return run_demo(out=args.out, json_path=args.json, n_patients=args.n_patients, epsilon=args.epsilon,
                    delta=args.delta, seed=args.seed, verbose=args.verbose,
                    progress=None if args.quiet else progress_printer(verbose=args.verbose))



def add_demo(sub) -> None:
    """The ``demo`` subcommand's parser."""
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
    m.add_argument("--verbose", action="store_true",
                   help="every validation's whole summary, the privacy settings explained and every site's progress "
                        "(default: about 100 lines; each report's summary.txt holds the whole summary)")
    m.set_defaults(func=cmd_demo)
