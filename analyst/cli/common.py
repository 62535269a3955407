"""What the ``dsroc`` subcommands share: the epilog, progress lines, and the exit status of partial answers."""

from __future__ import annotations

import json
import sys
import threading

__all__ = ["EPILOG", "EXIT_INTERRUPTED", "EXIT_PARTIAL", "json_with_failures", "print_progress", "progress_printer",
           "report_failures"]

EPILOG = """\
Every site decides its own sensitivity and noise and checks each request against its policy and
privacy budget; the analyst only ever receives noisy scores and aggregates over at least q patients.
Documentation: docs/analyst.md."""

_PRINT_LOCK = threading.Lock()  # progress arrives from the fan-out threads


def print_progress(step: str, site: str | None, message: str) -> None:
    where = f"[{site}]" if site else ""
    with _PRINT_LOCK:
        sys.stderr.write(f"  {step:<28} {where:<12} {message}\n")
        sys.stderr.flush()


def progress_printer(*, verbose: bool = False):
    """The progress callback of a command: every message of every site with ``verbose`` (:func:`print_progress`),
    else one line per step, its first message, when the step changes."""
    if verbose:
        return print_progress
    last = [None]

    def step_only(step: str, site: str | None, message: str) -> None:
        with _PRINT_LOCK:
            if step == last[0]:
                return
            last[0] = step
        print_progress(step, site, message)
    return step_only


#: Exit status when some sites answered and others failed (describe, budget).
EXIT_PARTIAL = 4
#: Exit status after Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130

def report_failures(answers) -> int:
    """Print a line per failed site; the exit status (0, EXIT_PARTIAL, or raise when no site answered)."""
    answers.raise_if_none()
    for site, exc in answers.failed.items():
        print(f"{site}: FAILED ({exc.code.name}): {exc.message}")
    if answers.failed:
        print(f"partial answer: {len(answers)} of {len(answers) + len(answers.failed)} sites answered", file=sys.stderr)
    return EXIT_PARTIAL if answers.failed else 0


def json_with_failures(answers) -> str:
    out = dict(answers)
    out.update({site: {"error": {"code": e.code.name, "message": e.message}} for site, e in answers.failed.items()})
    return json.dumps(out, indent=2)
