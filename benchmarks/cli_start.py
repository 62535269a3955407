"""Benchmark: CPU seconds of starting the command-line tools and importing the daemon, per tree, median of runs.

Each command runs in a fresh interpreter with the tree first on PYTHONPATH; its CPU time (user + sys of the
child, from ``resource.getrusage``) is taken over ``--runs`` runs, interleaved between the trees, and the median
printed beside the baseline's (``--baseline DIR``: another checkout, e.g. ``git archive main | tar -x -C /tmp/base``).
Run from the repository root:

    python -m benchmarks.cli_start --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

__all__ = ["COMMANDS", "cpu_of", "main"]

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "dsroc --version": ["-m", "analyst", "--version"],
    "dsroc-site --version": ["-m", "site_node", "--version"],
    "import site_node.server": ["-c", "import site_node.server"],
    "import analyst": ["-c", "import analyst"],
}


def cpu_of(tree: Path, args: list[str]) -> float:
    """CPU seconds (user + sys) of ``python args`` with ``tree`` first on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), check=True,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command per tree (default 7)")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured the same way, interleaved")
    args = parser.parse_args(argv)
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    times = {(label, name): [] for label, _ in trees for name in COMMANDS}
    for run in range(args.runs):
        for label, tree in (trees if run % 2 == 0 else trees[::-1]):
            for name, command in COMMANDS.items():
                times[label, name].append(cpu_of(tree, command))
    print(f"start-up CPU seconds (user + sys), median of {args.runs} runs, {os.cpu_count()} CPUs")
    for name in COMMANDS:
        now = float(np.median(times["this tree", name]))
        line = f"  {name:<26} {now:6.3f} CPU-s"
        if args.baseline:
            before = float(np.median(times["baseline", name]))
            line += f"   baseline {before:6.3f} CPU-s   ({before / now:.1f}x less)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
