"""The simulation study (SPEC section 7) in `paper`, `protocol` and `histogram` modes, and the protocol comparison; see docs/simulations.md."""

from .common.dgp import generate_batch, generate_replication
from .paper.report import write_report
from .common.results import load_results
from .runner import run_study
from .common.settings import Setting, all_settings, select_settings

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
