"""Command-line interface of the simulation study."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .mechanisms.checks import run_checks
from .mechanisms.report import write_mechanisms_report
from .protocol.coverage import coverage_by_n, write_coverage
from .protocol.paper_coverage import SHAPES, annotate_recommended, run_paper_coverage, write_paper_coverage
from .paper.report import TOLERANCES, write_report
from .runner import DEFAULT_CHUNK, run_study

__all__ = ["main", "build_parser"]

DESCRIPTION = """\
Simulation study of the distributed ROC-GLM (Schalk et al. 2024), SPEC section 7.

Each replication simulates one data set (n uniform in 100..2500, scores U[0,1], labels 1(s > 0.5)
with a random fraction redrawn) and compares the empirical AUC of the true pooled scores with the
ROC-GLM AUC computed from noisy scores, for 125 privacy settings (sensitivity x epsilon x delta, noise
by the analytic Gaussian mechanism) plus the noise-free one.

  paper     the published study: noise on all scores truncated to [0,1], pooled ROC-GLM with the
            strict survivor function, CIs centred at the empirical AUC (fast, batched).
  protocol  the deployed pipeline in process: five sites release noisy scores, true positives are
            placed under the pooled noisy negatives, distributed Fisher scoring and distributed CI.
  histogram the histogram protocol (end-to-end DP): five sites release noisy per-class histograms,
            the analyst's dsroc.histogram_validation estimates (settings: epsilon x delta).
  compare   every protocol at its stated guarantee on a binormal design (n 250, 1 000, 10 000):
            AUC MAE and CI coverage against epsilon (also: python -m simulations compare).
  stress    the histogram protocol (and its one-release equal grid, a flat 20-bin baseline, secagg and the
            paper protocol) on an independent
            generator: 4 score shapes x prevalence x AUC x n x sites x epsilon; bias, MAE, RMSE and CI
            coverage of AUC, Brier, O/E and calibration slope (python -m simulations stress).
  daemons   the stress study's target cells through five real site daemons (TLS), beside the in-process study
            on the same patients (python -m simulations daemons); with --survival, the survival study's target
            cell through them (python -m simulations daemons --survival).
  survival  time-to-event validation: Weibull and piecewise-exponential cohorts with a prognostic score,
            independent censoring, 2-20 sites, epsilon 0.5-5; bias, MAE and CI coverage of AUC(t), Uno's and
            Harrell's C, Brier(t) and O/E(t) against the pooled and the population values
            (python -m simulations survival).
  multicentre  heterogeneity across sites (prediction interval, tau^2), subgroups, decision curves and
            two models compared, each from simulated DP releases against the pooled truth.
"""

EPILOG = """\
examples:
  python -m simulations run --reps 200 --settings noise-free sens=0.1 --out /tmp/small
  python -m simulations run --mode paper --reps 10000 --workers 2 --out runs/full-paper
  python -m simulations run --mode protocol --reps 1000 --workers 2 --out runs/protocol
  python -m simulations run --mode histogram --reps 1000 --workers 2 --out runs/histogram
  python -m simulations compare --reps 200 --out runs/compare
  python -m simulations report runs/full-paper
  python -m simulations mechanisms --reps 200 --workers 2 --out runs/mechanisms
  python -m simulations run --mode protocol --n 100000 --reps 200 --settings noise-free sens=0.1_eps=5_delta=0.01 --out runs/cov-1e5
  python -m simulations coverage runs/cov-1e3 runs/cov-1e4 runs/cov-1e5 --out runs/coverage
  python -m simulations stress --workers 2 --out runs/stress
  python -m simulations daemons --reps 100 --out runs/daemons
  python -m simulations daemons --survival --reps 30 --out runs/survival-daemons
  python -m simulations survival --targets --workers 2 --out runs/survival-targets
  python -m simulations paper-coverage --settings sens=0.1_eps=5_delta=0.01 --out runs/paper-coverage \
      --recommended analyst/data/recommended_protocol.csv

Interrupted runs resume: call run again with the same options and --out.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (sub-commands ``run`` and ``report``)."""
    parser = argparse.ArgumentParser(prog="python -m simulations", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or resume) the study, then write the report",
                         description="Run (or resume) the study and write its tables and figures into --out.")
    run.add_argument("--mode", choices=("paper", "protocol", "histogram", "compare"), default="paper",
                     help="which study (default: paper)")
    run.add_argument("--reps", type=int, default=10_000, help="replications per setting (default: 10000)")
    run.add_argument("--workers", type=int, default=1, help="local worker processes (default: 1)")
    run.add_argument("--seed", type=int, default=1, help="base seed; results depend on it only (default: 1)")
    run.add_argument("--settings", nargs="+", metavar="NAME",
                     help="settings to run: 'noise-free', 'sens=0.1' (its 25 settings) or full names such as "
                          "'sens=0.1_eps=0.5_delta=0.001' (default: all 126)")
    run.add_argument("--scheduler", metavar="ADDRESS", help="run the chunks on this Dask scheduler (needs dsroc[dask])")
    run.add_argument("--chunk", type=int, help=f"replications per unit of work (default: {DEFAULT_CHUNK['paper']} in paper mode, {DEFAULT_CHUNK['protocol']} in protocol mode)")
    run.add_argument("--tolerance", type=float, nargs="+", default=list(TOLERANCES),
                     help=f"MAE tolerance(s) for recommended.csv (default: {' '.join(map(str, TOLERANCES))})")
    run.add_argument("--n", type=int, help="patients per replication (default: uniform in 100..2500, as in the paper); "
                                           "e.g. the coverage study at 1000 ... 1000000")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--out", required=True, help="output folder (created; resumed if it holds the same run)")
    cmp = sub.add_parser("compare", help="run (or resume) the protocol comparison, then write its table and figure",
                         description="Every protocol at its stated guarantee: AUC MAE and CI coverage against epsilon "
                                     "(binormal scores, prevalence 0.3, 5 sites, n 250 / 1 000 / 10 000).")
    cmp.add_argument("--reps", type=int, default=200, help="replications per cell (default: 200)")
    cmp.add_argument("--workers", type=int, default=1, help="local worker processes (default: 1)")
    cmp.add_argument("--seed", type=int, default=1, help="base seed (default: 1)")
    cmp.add_argument("--settings", nargs="+", metavar="NAME",
                     help="cells to run, e.g. 'histogram_n=1000_eps=1_delta=1e-05' (default: all 72)")
    cmp.add_argument("--scheduler", metavar="ADDRESS", help="run the chunks on this Dask scheduler")
    cmp.add_argument("--quiet", action="store_true", help="no progress lines")
    cmp.add_argument("--out", required=True, help="output folder (created; resumed if it holds the same run)")
    mech = sub.add_parser(
        "mechanisms", help="run (or resume) the study of every private AUC mechanism of the seed papers",
        description="Paper protocol (model and range rules), histogram protocol, Boyd M1/M2 (per site and central), "
                    "FedAUC_RR and FedAUC_Lap on the same replications, for epsilon x n x K; then the seed papers' "
                    "headline checks (Boyd's DP vs estimation error, Sun's Tables 5 and 2), the frontier table and figure.")
    mech.add_argument("--reps", type=int, default=200, help="replications per setting (default: 200)")
    mech.add_argument("--workers", type=int, default=1, help="local worker processes (default: 1)")
    mech.add_argument("--seed", type=int, default=1, help="base seed (default: 1)")
    mech.add_argument("--settings", nargs="+", metavar="NAME",
                      help="settings: 'n=1000', 'n=1000_K=5' or full names such as 'n=1000_K=5_eps=1' (default: all 63)")
    mech.add_argument("--scheduler", metavar="ADDRESS", help="run the chunks on this Dask scheduler")
    mech.add_argument("--chunk", type=int, help=f"replications per unit of work (default: {DEFAULT_CHUNK['mechanisms']})")
    mech.add_argument("--check-runs", type=int, default=100, help="runs of the Sun checks (default: 100, as the paper)")
    mech.add_argument("--check-reps", type=int, default=2000, help="data sets of the Boyd check (default: 2000)")
    mech.add_argument("--quiet", action="store_true", help="no progress lines")
    mech.add_argument("--out", required=True, help="output folder (created; resumed if it holds the same run)")
    st = sub.add_parser(
        "stress", help="run (or resume) the stress study on an independent generator, then write its tables and figure",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The histogram protocol as the sites and the analyst run it by default (two-stage quantile\n"
                    "grid, score sums), its one-release equal grid (the default before), a flat 20-bin baseline, secagg\n"
                    "and the paper protocol (noise-corrected AUC, recommended settings), on data from\n"
                    "simulations.stress.designs: score shapes calibrated binormal, skewed logistic, bimodal mixture and\n"
                    "piecewise uniform, prevalence 0.02-0.5, AUC 0.6-0.99, n 250-100 000, 2/5/50 sites, epsilon\n"
                    "0.5/1/5 (delta 1e-5). Per cell: bias, MAE, RMSE, CI coverage of the pooled and the population\n"
                    "value, mean CI width and SE, each with its Monte-Carlo SE, for AUC, Brier, O/E and slope.\n\n"
                    "grids: default  57 cells around the centre (binormal, prevalence 0.3, AUC 0.76, n 10 000,\n"
                    "                5 sites, epsilon 1): shape x prevalence, shape x AUC, shape x n,\n"
                    "                prevalence x n, sites x epsilon; paper protocol on binormal and skewed\n"
                    "                scores, n 10^3..10^6, 3 recommended settings (~15 min on 2 workers)\n"
                    "       --full   the full factorial (2 304 cells; all 45 recommended settings): many hours\n"
                    "       --targets  the 8 histogram cells the stress study sets targets in (minutes)\n"
                    "       --smoke  6 cells, seconds (what the test suite runs)\n\n"
                    "Writes into --out: parts/ (per unit of work, resumable), stress.csv (every cell),\n"
                    "stress.md (targets, headline cells, FedCurve beside ours, paper protocol, cells that miss the\n"
                    "coverage and bias target), stress.png.")
    size = st.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the full factorial instead of the default fractional grid")
    size.add_argument("--smoke", action="store_true", help="a seconds-long grid of 6 cells")
    size.add_argument("--targets", action="store_true",
                      help="only the 8 histogram cells the stress study sets targets in (minutes)")
    st.add_argument("--reps", type=int, default=200,
                    help="replications per cell (default: 200; paper cells at n 10^5 and 10^6 run 1/4 and 1/10 of them)")
    st.add_argument("--no-score-sums", action="store_true",
                    help="the default releases (histogram, histogram_equal, secagg) without per-bin score sums (counts only)")
    st.add_argument("--protocols", nargs="+", metavar="P", default=None,
                    help="only these of histogram, histogram_equal, flat20, secagg, paper (default: all)")
    st.add_argument("--workers", type=int, default=1, help="local worker processes (default: 1)")
    st.add_argument("--seed", type=int, default=1, help="base seed; results depend on it only (default: 1)")
    st.add_argument("--quiet", action="store_true", help="no progress lines")
    st.add_argument("--out", required=True, help="output folder (created; resumed if it holds the same run)")
    sv = sub.add_parser(
        "survival", help="run (or resume) the survival study, then write its tables and figure",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Time-to-event validation under DP (simulations.survival). Each replication draws a cohort from a\n"
                    "proportional-hazards model (Weibull or piecewise-exponential baseline, linear predictor N(0, 1)),\n"
                    "a score predicting the risk of an event by the horizon t = 1 (calibrated or mis-calibrated) and\n"
                    "independent exponential censoring; splits it over sites of unequal size (shares 1:2:...); draws\n"
                    "every site's release with dsroc.survival.release.draw_survival_release (the site daemon's\n"
                    "function; seeded discrete Laplace noise, counts and risk sums) on public quantile grids; and\n"
                    "estimates AUC(t) at the median follow-up, Uno's C (tau: the 80 % follow-up quantile), Harrell's\n"
                    "C, Brier(t) and O/E(t) at the horizon with dsroc.survival, each with the bootstrap interval of\n"
                    "dsroc.survival.intervals.survival_interval. Against the pooled unbinned noise-free estimates\n"
                    "(the study's own per-patient implementation) and the population values (numerical\n"
                    "integration): bias, MAE and coverage per cell.\n\n"
                    "grids: default   27 cells: the targets' 9, then one factor at a time around the centre\n"
                    "                 (Weibull, risk 0.3, 50 % censored, n 10 000, 5 sites, epsilon 1): risk 0.05-0.5,\n"
                    "                 n 10^3 and 10^5, 2 and 20 sites, epsilon 0.5/2/5 and no noise (~40 min, 1 core)\n"
                    "       --targets 9 cells at epsilon 1, n 10 000, 5 sites: both models and a mis-calibrated\n"
                    "                 score at 30/50/70 % censoring (~8 min)\n"
                    "       --full    the factorial: 2 models x 2 calibrations x censoring 20/50/70 % x risk\n"
                    "                 0.05/0.1/0.3/0.5 x n 10^3/10^4/10^5 x 2/5/20 sites x epsilon 0.5/1/2/5\n"
                    "                 (1 728 cells; days on one core)\n"
                    "       --smoke   2 cells at n 1 000 (seconds; what the test suite runs)\n\n"
                    "Writes into --out: parts/ (one file per cell and block of replications; an interrupted run\n"
                    "resumes), survival.csv (every cell and statistic), survival.md (the targets, then every\n"
                    "cell), survival.png (coverage and bias per cell and statistic).")
    sv_size = sv.add_mutually_exclusive_group()
    sv_size.add_argument("--targets", action="store_true", help="only the 9 cells the targets are set in")
    sv_size.add_argument("--full", action="store_true", help="the full factorial (1 728 cells)")
    sv_size.add_argument("--smoke", action="store_true", help="2 small cells, seconds")
    sv.add_argument("--reps", type=int, default=200, help="replications per cell (default: 200)")
    sv.add_argument("--draws", type=int, default=100, help="bootstrap draws per interval (default: 100)")
    sv.add_argument("--time-bins", type=int, default=20,
                    help="time bins at quantiles of the follow-up, before the evaluation times are added (default: 20)")
    sv.add_argument("--score-bins", type=int, default=20, help="score bins at quantiles of the score (default: 20)")
    sv.add_argument("--workers", type=int, default=1, help="local worker processes (default: 1)")
    sv.add_argument("--seed", type=int, default=1, help="base seed; results depend on it only (default: 1)")
    sv.add_argument("--quiet", action="store_true", help="no progress bar")
    sv.add_argument("--out", required=True, help="output folder (created; resumed if it holds the same run)")
    multi = sub.add_parser("multicentre", help="run the multicentre study and write multicentre.csv",
                           description="Heterogeneity (10 sites from a random-effects model, n 2 000 each, eps 1 and 5), "
                                       "subgroups (AUC 0.70 vs 0.80), decision curves (thresholds 10/20/30 %) and a paired "
                                       "comparison (delta AUC 0.03), n 10 000 over 5 sites at eps 1; ~10 minutes at 200 reps.")
    multi.add_argument("--reps", type=int, default=200, help="replications per analysis (default: 200)")
    multi.add_argument("--seed", type=int, default=0, help="base seed (default: 0)")
    multi.add_argument("--out", required=True, help="output folder (created)")
    dm = sub.add_parser("daemons", help="run the stress study's target cells through five real site daemons",
                        description="The stress study's AUC target cells (5 sites, epsilon 1) with the stress study's data, "
                                    "served by five `python -m site_node serve` daemons (default site policy, mutual "
                                    "TLS) and validated through analyst.Federation as a user does, beside the "
                                    "in-process study on the same patients. Writes daemons.csv, daemons.md and "
                                    "config.json into --out; a few minutes at 100 replications.")
    dm.add_argument("--reps", type=int, default=100, help="replications per cell (default: 100)")
    dm.add_argument("--seed", type=int, default=1, help="the stress study's data seed (default: 1)")
    dm.add_argument("--protocols", nargs="+", choices=("histogram", "secagg"), default=["histogram", "secagg"],
                    help="protocols to run (default: both)")
    dm.add_argument("--survival", action="store_true",
                    help="instead, the survival study's target cell (epsilon 1, n 10 000, 5 sites, 50 %% censoring, "
                         "Weibull): its cohorts at five daemons whose policy lists the study's time grid, validated "
                         "by fed.validate(..., time=, horizon=) beside the in-process survival study on the same "
                         "cohorts; writes survival_daemons.csv and survival_daemons.md (seed: the survival study's)")
    dm.add_argument("--out", required=True, help="output folder (created; its federation/ folder is rewritten)")
    rep = sub.add_parser("report", help="write tables and figures of a finished run",
                         description="Write table1.csv/.md, settings.csv, recommended.csv and the figures.")
    rep.add_argument("out", help="the run's output folder")
    rep.add_argument("--tolerance", type=float, nargs="+", default=list(TOLERANCES),
                     help=f"MAE tolerance(s) for recommended.csv (default: {' '.join(map(str, TOLERANCES))})")
    cov = sub.add_parser("coverage", help="stack the coverage tables of finished runs (e.g. one per --n)",
                         description="Write coverage.csv/.md of several finished runs into --out.")
    cov.add_argument("runs", nargs="+", help="the runs' output folders")
    cov.add_argument("--out", required=True, help="folder for the combined coverage.csv and coverage.md")
    pc = sub.add_parser("paper-coverage", help="coverage of the paper protocol's noise-corrected AUC per score shape and n",
                        description="Protocol mode at fixed n on several score shapes (binormal, skewed, bimodal, the "
                                    "paper's uniform): coverage of the pooled and population AUC by the paper's and the "
                                    "noise-corrected CI; writes paper_coverage.csv/.md (and, with --recommended, that "
                                    "table with the corrected CI's worst coverage per setting).")
    pc.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES), help="score shapes (default: all)")
    pc.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000], help="patients per replication")
    pc.add_argument("--reps", type=int, nargs="+", default=[100, 40, 16, 6], help="replications per n (one count per --n)")
    pc.add_argument("--settings", nargs="+", metavar="NAME", required=True, help="protocol settings, e.g. sens=0.1_eps=5_delta=0.01")
    pc.add_argument("--seed", type=int, default=1, help="base seed (default: 1)")
    pc.add_argument("--recommended", metavar="CSV", help="a recommended table to annotate (written to --out/recommended.csv)")
    pc.add_argument("--quiet", action="store_true", help="no progress lines")
    pc.add_argument("--out", required=True, help="output folder (created; finished chunks are kept and reused)")
    return parser


def _paper_coverage(args) -> str:
    """Run (or resume) the paper-protocol coverage study and write its tables."""
    import pandas as pd

    table = run_paper_coverage(args.out, shapes=args.shapes, ns=args.n, reps=args.reps, settings=args.settings,
                               seed=args.seed, progress=None if args.quiet else sys.stderr)
    path = write_paper_coverage(args.out, table)
    if args.recommended:
        annotate_recommended(pd.read_csv(args.recommended), table).to_csv(Path(args.out) / "recommended.csv", index=False)
    return path.read_text()


def _mechanisms(args) -> dict:
    """Run (or resume) the mechanisms study, the papers' checks (once), and write its report."""
    timing = run_study(args.out, mode="mechanisms", reps=args.reps, seed=args.seed, settings=args.settings,
                       workers=args.workers, scheduler=args.scheduler, chunk=args.chunk,
                       progress=None if args.quiet else sys.stderr)
    print(json.dumps(timing, indent=2))
    checks = Path(args.out) / "checks.json"
    if not checks.exists():
        tmp = checks.with_suffix(".tmp")
        tmp.write_text(json.dumps(run_checks(args.seed, boyd_reps=args.check_reps, sun_runs=args.check_runs), indent=2) + "\n")
        tmp.replace(checks)
    return write_mechanisms_report(args.out)


def _mode_of(out) -> str | None:
    config = Path(out) / "config.json"
    return json.loads(config.read_text()).get("mode") if config.exists() else None


def _stress(args) -> dict:
    """Run (or resume) the stress study and write its report."""
    from .stress.report import write_stress_report
    from .stress.run import run_stress

    grid = "full" if args.full else "smoke" if args.smoke else "targets" if args.targets else "default"
    timing = run_stress(args.out, grid=grid, reps=args.reps, seed=args.seed, workers=args.workers,
                        score_sums=not args.no_score_sums, **({"protocols": args.protocols} if args.protocols else {}),
                        progress=None if args.quiet else sys.stderr)
    print(json.dumps(timing, indent=2))
    return write_stress_report(args.out)


def _survival(args) -> dict:
    """Run (or resume) the survival study and write its report."""
    from .survival.report import write_survival_report
    from .survival.run import run_survival

    grid = "full" if args.full else "smoke" if args.smoke else "targets" if args.targets else "default"
    timing = run_survival(args.out, grid=grid, reps=args.reps, seed=args.seed, workers=args.workers, draws=args.draws,
                          time_bins=args.time_bins, score_bins=args.score_bins,
                          progress=None if args.quiet else sys.stderr)
    print(json.dumps(timing, indent=2))
    return write_survival_report(args.out)


def _json_report_writer(mode: str | None):
    """The report writer of a study whose report is printed as JSON (imported only when asked), else None."""
    if mode == "survival":
        from .survival.report import write_survival_report

        return write_survival_report
    if mode == "stress":
        from .stress.report import write_stress_report

        return write_stress_report
    return write_mechanisms_report if mode == "mechanisms" else None


def main(argv=None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "survival":
            print(json.dumps(_survival(args), indent=2, default=str))
            return 0
        if args.command == "report" and (writer := _json_report_writer(_mode_of(args.out))) is not None:
            print(json.dumps(writer(args.out), indent=2, default=str))
            return 0
        if args.command == "stress":
            print(json.dumps(_stress(args), indent=2, default=str))
            return 0
        if args.command == "mechanisms":
            print(json.dumps(_mechanisms(args), indent=2, default=str))
            return 0
        if args.command == "paper-coverage":
            print(_paper_coverage(args))
            return 0
        if args.command == "daemons" and args.survival:
            from .daemons.survival import run_survival_daemon_check, survival_daemon_table  # starts daemons

            rows = run_survival_daemon_check(args.out, reps=args.reps, seed=args.seed)
            print(survival_daemon_table(rows).to_string(index=False))
            return 0
        if args.command == "daemons":
            from .daemons.check import daemon_table, run_daemon_check, TARGET_CELLS  # starts daemons: only this command

            rows = run_daemon_check(args.out, reps=args.reps, seed=args.seed, protocols=tuple(args.protocols))
            print(daemon_table(rows, {c.name: bound for c, bound in TARGET_CELLS}).to_string(index=False))
            return 0
        if args.command == "multicentre":
            from .multicentre.study import run_multicentre  # only this command needs it

            table = run_multicentre(args.reps, seed=args.seed)
            Path(args.out).mkdir(parents=True, exist_ok=True)
            table.to_csv(Path(args.out) / "multicentre.csv", index=False)
            print(table.T.to_string(header=False))
            return 0
        if args.command == "coverage":
            table = write_coverage(args.out, coverage_by_n(args.runs))
            print(table.to_string(index=False))
            return 0
        if args.command == "compare":
            timing = run_study(args.out, mode="compare", reps=args.reps, seed=args.seed, settings=args.settings,
                               workers=args.workers,
                               scheduler=args.scheduler, progress=None if args.quiet else sys.stderr)
            print(json.dumps(timing, indent=2))
            args.tolerance = list(TOLERANCES)
        elif args.command == "run":
            timing = run_study(args.out, mode=args.mode, reps=args.reps, seed=args.seed, settings=args.settings,
                               workers=args.workers, scheduler=args.scheduler, chunk=args.chunk, n=args.n,
                               progress=None if args.quiet else sys.stderr)
            print(json.dumps(timing, indent=2))
        summary = write_report(args.out, tolerances=args.tolerance)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: the workers are stopped and the finished chunks are saved in {args.out}; run the "
              "same command again to resume", file=sys.stderr)
        return 130
    print(json.dumps(summary, indent=2, default=str))
    return 0
