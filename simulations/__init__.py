"""The simulation study (SPEC section 7) in `paper`, `protocol` and `histogram` modes, and the protocol comparison; see docs/simulations.md."""

from .dgp import generate_batch, generate_replication
from .report import write_report
from .runner import load_results, run_study
from .settings import Setting, all_settings, select_settings

__all__ = [
    "Setting",
    "all_settings",
    "select_settings",
    "generate_replication",
    "generate_batch",
    "run_study",
    "load_results",
    "write_report",
]
