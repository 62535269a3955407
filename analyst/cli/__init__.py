"""The ``dsroc`` command: validate, describe, budget, recommend and the five-site GBSG2 demo (a module each)."""

from __future__ import annotations

import argparse
import sys
import warnings

from analyst.cli.common import EPILOG, EXIT_INTERRUPTED
from analyst.cli.demo import add_demo
from analyst.cli.recommend import add_recommend
from analyst.cli.sites import add_budget, add_describe, budget_rows
from analyst.cli.validate import add_validate

__all__ = ["budget_rows", "main", "parser"]


def parser() -> argparse.ArgumentParser:
    """The `dsroc` argument parser: one subcommand per module of this package."""
    p = argparse.ArgumentParser(
        prog="dsroc", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Validate a binary or survival prediction model on data held by several hospitals\n"
                    "(differentially private releases): AUC with CI, ROC curve, Brier score, calibration;\n"
                    "with --time AUC(t), C-indices, Brier(t) and calibration at a horizon, censoring handled.")
    from site_node.cli import package_version

    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_validate(sub)
    add_describe(sub)
    add_budget(sub)
    add_recommend(sub)
    add_demo(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dsroc`` console script; returns the exit status."""
    args = parser().parse_args(argv)  # --version and --help end here, before gRPC is imported
    from analyst.connection import SiteError

    try:
        with warnings.catch_warnings():
            # fitting warnings are on the result and printed in its summary; no second, source-line copy
            warnings.simplefilter("ignore", RuntimeWarning)
            return args.func(args)
    except SiteError as exc:
        print(f"dsroc: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt as exc:  # Ctrl-C: one line saying what the sites charged, no traceback
        print(f"dsroc: interrupted; {exc}" if str(exc) else "dsroc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, OSError) as exc:
        print(f"dsroc: error: {exc}", file=sys.stderr)
        return 2
