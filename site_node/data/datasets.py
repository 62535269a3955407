"""Dataset stores: CSV, Parquet and SQL (SQLAlchemy) tables read once into numpy columns, per-column data checks."""

from __future__ import annotations

from typing import Callable

import logging
import threading

import numpy as np

from ..config import DatasetConfig
from ..errors import InvalidArgument, NotFound
from .tables import FileTable, SqlTable, Table, TableSource, column_dtype, open_table, read_error, read_table

__all__ = [
    "TableSource",
    "FileTable",
    "SqlTable",
    "open_table",
    "read_error",
    "Table",
    "read_table",
    "DatasetStore",
    "outcome_values",
    "score_values",
    "feature_values",
    "strata_values",
    "time_values",
    "column_dtype",
]

log = logging.getLogger("dsroc.site")


class DatasetStore:
    """The site's datasets, each read once on first use and kept in memory as a :class:`Table` (thread-safe).

    Parameters
    ----------
    datasets : mapping of str to DatasetConfig
    reader : callable, default :func:`read_table`
        Reads one dataset; the daemon passes :func:`site_node.data.table_reader.read_table_in_helper`.
    many_reader : callable, optional
        Reads several at once for :meth:`prefetch`, a table or an exception per config; the daemon passes
        :func:`site_node.data.table_reader.read_tables_in_helper` (one helper process for all).
    """

    def __init__(self, datasets: dict[str, DatasetConfig], *, reader: Callable[[DatasetConfig], Table] = read_table,
                 many_reader: Callable[[list[DatasetConfig]], list] | None = None):
        self._configs = dict(datasets)
        self._tables: dict[str, Table] = {}
        self._reader = reader
        self._many_reader = many_reader
        self._locks = {name: threading.Lock() for name in self._configs}  # one per dataset: a slow read waits alone

    def config(self, name: str) -> DatasetConfig:
        """The config of dataset ``name``; :class:`NotFound` if there is none."""
        try:
            return self._configs[name]
        except KeyError:
            raise NotFound(f"dataset {name!r} does not exist at this site") from None

    def names(self) -> list[str]:
        """All dataset names."""
        return list(self._configs)

    def prefetch(self, names) -> None:
        """Read the datasets ``names`` not read yet, together when the store has a ``many_reader`` (the warm-up).

        One that cannot be read is left unread: :meth:`table` reads it again on first use and logs why."""
        todo = [name for name in names if name not in self._tables]
        if self._many_reader is None or not todo:
            return
        for name, table in zip(todo, self._many_reader([self.config(name) for name in todo])):
            if isinstance(table, Table):
                with self._locks[name]:
                    self._tables.setdefault(name, table)

    def table(self, name: str) -> Table:
        """The rows of dataset ``name``."""
        config = self.config(name)
        with self._locks[name]:
            if name not in self._tables:
                try:
                    self._tables[name] = self._reader(config)
                except Exception as exc:
                    # The reason (path, driver message) is for the administrator, not the analyst; a missing or
                    # unreadable file in one line, anything unexpected with its traceback.
                    if isinstance(exc, OSError):
                        log.error("cannot read dataset %s: %s", name, read_error(config, exc))
                    else:
                        log.exception("cannot read dataset %s: %s", name, read_error(config, exc))
                    raise InvalidArgument(
                        f"dataset {name!r} cannot be read at this site; the site administrator can see why in the site log"
                    ) from None
            return self._tables[name]


# The data checks below name the column and the rule but never the number of offending rows or any
# value: such counts are aggregates that may describe fewer than q patients.

def _column(table: Table, dataset: str, column: str) -> np.ndarray | None:
    """The values of a readable column (None for a non-numeric one)."""
    if column not in table.kinds:
        raise InvalidArgument(f"dataset {dataset!r} has no column {column!r}")
    return table.values.get(column)


def outcome_values(table: Table, dataset: str, column: str) -> np.ndarray:
    """The outcome column as 0/1 int8 labels, or :class:`InvalidArgument` naming the column and problem."""
    values = _column(table, dataset, column)
    if column in table.missing:
        raise InvalidArgument(f"dataset {dataset!r}, outcome column {column!r}: has missing values")
    if values is None:
        raise InvalidArgument(f"dataset {dataset!r}, outcome column {column!r}: labels must be 0 or 1 (column is not numeric)")
    if values.dtype.kind != "b" and not np.all((values == 0) | (values == 1)):
        raise InvalidArgument(f"dataset {dataset!r}, outcome column {column!r}: labels must be 0 or 1 (other values found)")
    return values.astype(np.int8, copy=False)


def _numeric(table: Table, dataset: str, column: str, what: str) -> np.ndarray:
    values = _column(table, dataset, column)
    if values is None:
        raise InvalidArgument(f"dataset {dataset!r}, {what} column {column!r}: is not numeric")
    values = values.astype(np.float64, copy=False)
    if not np.isfinite(values).all():
        raise InvalidArgument(f"dataset {dataset!r}, {what} column {column!r}: has missing or non-finite values")
    return values


def score_values(table: Table, dataset: str, column: str, score_range: tuple[float, float]) -> np.ndarray:
    """A score column as float64, checked for missing values and the declared range."""
    values = _numeric(table, dataset, column, "score")
    lo, hi = score_range
    if values.min() < lo or values.max() > hi:
        raise InvalidArgument(
            f"dataset {dataset!r}, score column {column!r}: has scores outside the declared range [{lo}, {hi}]"
        )
    return values


def strata_values(table: Table, dataset: str, column: str) -> np.ndarray:
    """A strata column as float64, checked for missing and non-numeric values."""
    return _numeric(table, dataset, column, "strata")


def time_values(table: Table, dataset: str, column: str) -> np.ndarray:
    """A follow-up time column as float64: numeric, finite and ``>= 0``, or :class:`InvalidArgument` naming the
    column and the rule."""
    values = _numeric(table, dataset, column, "time")
    if values.size and values.min() < 0:
        raise InvalidArgument(f"dataset {dataset!r}, time column {column!r}: has negative values (follow-up times "
                              "must be >= 0)")
    return values


def feature_values(table: Table, dataset: str, columns) -> dict[str, np.ndarray]:
    """Model input columns as float64 arrays, checked for missing and non-numeric values."""
    return {c: _numeric(table, dataset, c, "model") for c in columns}
