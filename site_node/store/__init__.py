"""The site's durable state: the privacy ledger (interface and SQLite), private SQLite files, state marker, backups."""

from .backup import backup_state, restore_state
from .ledger import SqliteLedger, budget_mu
from .ledger_api import BudgetStatus, Ledger, Release, ReleaseKey, ReleasePlan, Reservation
from .sqlite_files import PrivateStore
from .state import (StateError, StateMarker, check_state, mark_served, open_state, serving_pid, state_problem,
    write_pid_file)

__all__ = ["backup_state", "restore_state", "SqliteLedger", "budget_mu", "BudgetStatus", "Ledger", "Release",
           "ReleaseKey", "ReleasePlan", "Reservation", "PrivateStore", "StateError", "StateMarker", "check_state",
           "mark_served", "open_state", "serving_pid", "state_problem", "write_pid_file"]
