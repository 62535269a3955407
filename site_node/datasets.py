"""Dataset stores: CSV, Parquet and SQL (SQLAlchemy) tables, loaded once, with per-column data checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import logging
import threading
from abc import ABC, abstractmethod

import numpy as np

from .config import DatasetConfig
from .errors import InvalidArgument, NotFound

if TYPE_CHECKING:  # pandas is imported when a table is read, not at daemon start-up
    import pandas as pd

__all__ = [
    "TableSource",
    "FileTable",
    "SqlTable",
    "open_table",
    "DatasetStore",
    "outcome_values",
    "score_values",
    "feature_values",
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
    """A CSV or Parquet file."""

    def load(self) -> pd.DataFrame:
        if self.config.format == "csv":
            import pandas as pd

            return pd.read_csv(self.config.path)
        import pandas as pd

        return pd.read_parquet(self.config.path)


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


class DatasetStore:
    """The site's datasets, each read once on first use and kept in memory (thread-safe)."""

    def __init__(self, datasets: dict[str, DatasetConfig]):
        self._configs = dict(datasets)
        self._tables: dict[str, pd.DataFrame] = {}
        self._lock = threading.Lock()

    def config(self, name: str) -> DatasetConfig:
        """The config of dataset ``name``; :class:`NotFound` if there is none."""
        try:
            return self._configs[name]
        except KeyError:
            raise NotFound(f"dataset {name!r} does not exist at this site") from None

    def names(self) -> list[str]:
        """All dataset names."""
        return list(self._configs)

    def table(self, name: str) -> pd.DataFrame:
        """The rows of dataset ``name``."""
        config = self.config(name)
        with self._lock:
            if name not in self._tables:
                try:
                    self._tables[name] = open_table(config).load()
                except Exception:
                    # The reason (path, driver message) is for the administrator, not the analyst.
                    log.exception("cannot read dataset %s", name)
                    raise InvalidArgument(
                        f"dataset {name!r} cannot be read at this site; the site administrator can see why in the site log"
                    ) from None
            return self._tables[name]


def column_dtype(series: pd.Series) -> str:
    """A short, portable dtype name for Describe."""
    kind = series.dtype.kind
    return {"f": "float", "i": "int", "u": "int", "b": "bool", "M": "datetime"}.get(kind, "string")


# The data checks below name the column and the rule but never the number of offending rows or any
# value: such counts are aggregates that may describe fewer than q patients.

def _column(table: pd.DataFrame, dataset: str, column: str) -> pd.Series:
    if column not in table.columns:
        raise InvalidArgument(f"dataset {dataset!r} has no column {column!r}")
    return table[column]


def outcome_values(table: pd.DataFrame, dataset: str, column: str) -> np.ndarray:
    """The outcome column as 0/1 int8 labels, or :class:`InvalidArgument` naming the column and problem."""
    s = _column(table, dataset, column)
    if s.isna().any():
        raise InvalidArgument(f"dataset {dataset!r}, outcome column {column!r}: has missing values")
    if s.dtype.kind == "b":
        return s.to_numpy().astype(np.int8)
    if s.dtype.kind not in "iuf":
        raise InvalidArgument(f"dataset {dataset!r}, outcome column {column!r}: labels must be 0 or 1 (column is not numeric)")
    values = s.to_numpy()
    if not np.all((values == 0) | (values == 1)):
        raise InvalidArgument(f"dataset {dataset!r}, outcome column {column!r}: labels must be 0 or 1 (other values found)")
    return values.astype(np.int8)


def _numeric(table: pd.DataFrame, dataset: str, column: str, what: str) -> np.ndarray:
    s = _column(table, dataset, column)
    if s.dtype.kind not in "iufb":
        raise InvalidArgument(f"dataset {dataset!r}, {what} column {column!r}: is not numeric")
    values = s.to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(values).all():
        raise InvalidArgument(f"dataset {dataset!r}, {what} column {column!r}: has missing or non-finite values")
    return values


def score_values(table: pd.DataFrame, dataset: str, column: str, score_range: tuple[float, float]) -> np.ndarray:
    """A score column as float64, checked for missing values and the declared range."""
    values = _numeric(table, dataset, column, "score")
    lo, hi = score_range
    if values.min() < lo or values.max() > hi:
        raise InvalidArgument(
            f"dataset {dataset!r}, score column {column!r}: has scores outside the declared range [{lo}, {hi}]"
        )
    return values


def feature_values(table: pd.DataFrame, dataset: str, columns) -> dict[str, np.ndarray]:
    """Model input columns as float64 arrays, checked for missing and non-numeric values."""
    return {c: _numeric(table, dataset, c, "model") for c in columns}
