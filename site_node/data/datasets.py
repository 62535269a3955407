"""Dataset stores: CSV, Parquet and SQL (SQLAlchemy) tables read once into numpy columns, per-column data checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import logging
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..config import DatasetConfig
from ..errors import InvalidArgument, NotFound

if TYPE_CHECKING:  # pandas is imported when a table is read, not at daemon start-up
    import pandas as pd

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


class TableSource(ABC):
    """Where a dataset's rows come from."""

    def __init__(self, config: DatasetConfig):
        self.config = config

    @abstractmethod
    def load(self) -> pd.DataFrame:
        """Read the whole table."""


class FileTable(TableSource):
    """A CSV or Parquet file. A CSV whose header holds no comma but semicolons (as spreadsheets write it where the
    decimal separator is a comma) is read with ``;`` as the separator, and with ``,`` as the decimal mark when its
    numbers are written so."""

    def load(self) -> pd.DataFrame:
        import pandas as pd

        path = self.config.path
        if self.config.format != "csv":
            return pd.read_parquet(path)
        frame = pd.read_csv(path)
        header = str(frame.columns[0]) if frame.shape[1] == 1 else ""
        if ";" not in header:
            return frame
        frame = pd.read_csv(path, sep=";")
        text = frame.select_dtypes(include="object")
        if text.shape[1] and text.apply(lambda c: c.astype(str).str.fullmatch(r"-?\d+,\d*").any()).any():
            frame = pd.read_csv(path, sep=";", decimal=",")
        log.info("dataset file %s: read with ';' as the column separator (its header has no comma)", path)
        return frame


def read_error(config: DatasetConfig, exc: BaseException) -> str:
    """Why a dataset could not be read, in one line for its administrator (the file, the driver's message)."""
    if isinstance(exc, FileNotFoundError):
        return f"data file not found: {config.path} (datasets.{config.name}.path)"
    if isinstance(exc, PermissionError):
        return f"data file not readable by this user: {config.path}"
    return f"{type(exc).__name__}: {exc}"


class SqlTable(TableSource):
    """A table or a query through an SQLAlchemy URL (an SQLite file, PostgreSQL, ...)."""

    def load(self) -> pd.DataFrame:
        import pandas as pd
        import sqlalchemy as sa

        engine = sa.create_engine(self.config.url)
        try:
            with engine.connect() as conn:
                if self.config.table is not None:
                    return pd.read_sql_table(self.config.table, conn)
                return pd.read_sql_query(sa.text(self.config.query), conn)
        finally:
            engine.dispose()


def open_table(config: DatasetConfig) -> TableSource:
    """The table source for a dataset config."""
    return SqlTable(config) if config.format == "sql" else FileTable(config)


def column_dtype(series: pd.Series) -> str:
    """A short, portable dtype name for Describe."""
    kind = series.dtype.kind
    return {"f": "float", "i": "int", "u": "int", "b": "bool", "M": "datetime"}.get(kind, "string")


@dataclass(frozen=True, eq=False)  # compared by identity: its columns are arrays
class Table:
    """A dataset as the site keeps it: no DataFrame, only what the site reads.

    ``kinds`` names every column (in the table's order) with its dtype name for Describe; ``values``
    holds, as read-only numpy arrays, the numeric columns a request may read (outcomes, scores, strata and
    model columns: every column when the config lists no model columns; missing values as NaN);
    ``missing`` names those of the readable columns, numeric or not, with missing values.
    """

    n_rows: int
    kinds: dict[str, str]
    values: dict[str, np.ndarray]
    missing: frozenset[str] = frozenset()

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, config: DatasetConfig) -> "Table":
        """The columns of ``frame`` the dataset ``config`` lets the site read (numpy columns are not copied)."""
        readable = set(config.outcomes) | set(config.scores) | set(config.strata_columns) | set(config.time_columns)
        readable |= set(config.model_columns) if config.model_columns is not None else {str(c) for c in frame.columns}
        kinds, values, missing = {}, {}, set()
        for column in frame.columns:
            series = frame[column]
            name = str(column)
            kinds[name] = column_dtype(series)
            if name not in readable:
                continue
            has_missing = bool(series.isna().any())
            if has_missing:
                missing.add(name)
            if series.dtype.kind in "iufb":
                array = (series.to_numpy(dtype=np.float64, na_value=np.nan) if has_missing
                         else series.to_numpy(dtype=getattr(series.dtype, "numpy_dtype", series.dtype)))
                values[name] = _compact(np.ascontiguousarray(array))
                values[name].flags.writeable = False
        return cls(len(frame), kinds, values, frozenset(missing))

    @property
    def columns(self) -> list[str]:
        """Every column's name."""
        return list(self.kinds)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def nbytes(self) -> int:
        """Memory held by the column values."""
        return sum(v.nbytes for v in self.values.values())


def _compact(values: np.ndarray) -> np.ndarray:
    """Integers in the smallest integer type that holds them all (a CSV's 0/1 outcome: int8, not int64)."""
    if values.dtype.kind not in "iu" or values.size == 0:
        return values
    lo, hi = values.min(), values.max()
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values


def read_table(config: DatasetConfig) -> Table:
    """Read a dataset in this process (pandas; SQLAlchemy for SQL)."""
    return Table.from_frame(open_table(config).load(), config)


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
