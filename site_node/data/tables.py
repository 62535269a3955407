"""A dataset's rows as the site keeps them (:class:`Table`) and how they are read: pandas for CSV and SQL, pyarrow
alone for a Parquet file of plain columns.

Imports neither grpc nor the site's config parser: the dataset reader's helper process (``site_node.data.table_reader``)
runs this module and nothing heavier.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..config.site_config import DatasetConfig

if TYPE_CHECKING:  # pandas is imported when a table is read, not at daemon start-up
    import pandas as pd

log = logging.getLogger("dsroc.site")

__all__ = ["TableSource", "FileTable", "SqlTable", "open_table", "read_error", "Table", "read_table",
           "read_parquet_plain", "column_dtype"]


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
    """Read a dataset in this process: a Parquet file of plain columns by pyarrow alone (:func:`read_parquet_plain`),
    anything else by pandas (SQLAlchemy for SQL)."""
    if config.format == "parquet":
        table = read_parquet_plain(config)
        if table is not None:
            return table
    return Table.from_frame(open_table(config).load(), config)


# Arrow types whose pandas column is the same numpy array (no nulls): kind name for Describe, by the type's id.
_PLAIN = {"int8": "int", "int16": "int", "int32": "int", "int64": "int", "uint8": "int", "uint16": "int",
          "uint32": "int", "uint64": "int", "float": "float", "double": "float", "bool": "bool",
          "string": "string", "large_string": "string"}


# What pandas' metadata may say of a plain column (anything else it restores to a type of its own).
_PANDAS_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "bool",
                 "unicode"}
_NUMPY_TYPES = _PANDAS_TYPES - {"unicode"} | {"object"}


def _plain_in_pandas(info: dict | None, name: str) -> bool:
    """Whether pandas' metadata of column ``name`` (None: the file has none) restores it as the plain column."""
    return info is None or (info.get("name") == name and info.get("pandas_type") in _PANDAS_TYPES
                            and info.get("numpy_type") in _NUMPY_TYPES)


_NUMPY = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32, "double": np.float64}


def _to_numpy(column) -> np.ndarray:
    """A plain numeric or boolean arrow column as the numpy array pandas makes of it (a float's nulls NaN), from
    its buffers: pyarrow's own ``to_numpy`` imports pandas."""
    parts = []
    for chunk in column.chunks:
        n, offset = len(chunk), chunk.offset
        validity, data = chunk.buffers()[:2]
        if str(chunk.type) == "bool":
            bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
            parts.append(bits[offset:offset + n].astype(bool))
            continue
        values = np.frombuffer(data, dtype=_NUMPY[str(chunk.type)])[offset:offset + n]
        if chunk.null_count:  # floats only (integers and booleans with nulls are pandas')
            valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[offset:offset + n]
            values = np.where(valid.astype(bool), values, np.nan).astype(values.dtype)
        parts.append(values)
    if not parts:
        return np.empty(0, dtype=_NUMPY.get(str(column.type), bool))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def read_parquet_plain(config: DatasetConfig) -> Table | None:
    """The :class:`Table` that ``Table.from_frame(pandas.read_parquet(path), config)`` gives, read by pyarrow without
    pandas (a third of the helper's start-up), for a file whose columns are all plain: integers, floats and booleans
    (integers and booleans without missing values, whose pandas columns are the same numpy arrays; floats may hold
    NaN or nulls, both NaN in pandas, as missing) and strings, with no index stored as a column and no pandas type
    (nullable integers, categories, dates) to restore. None for any other file: pandas reads it."""
    import pyarrow.parquet as pq

    arrow = pq.ParquetFile(config.path).read()  # not pq.read_table: it imports pyarrow.dataset (as much as pandas)
    meta = arrow.schema.pandas_metadata or {}
    if any(not isinstance(i, dict) for i in meta.get("index_columns", [])):  # an index kept as a column
        return None
    names = [str(n) for n in arrow.column_names]
    if len(set(names)) != len(names):
        return None
    described = {c.get("field_name"): c for c in meta.get("columns", [])}
    readable = set(config.outcomes) | set(config.scores) | set(config.strata_columns) | set(config.time_columns)
    readable |= set(config.model_columns) if config.model_columns is not None else set(names)
    kinds, values, missing = {}, {}, set()
    for name, column in zip(names, arrow.columns):
        kind = _PLAIN.get(str(column.type))
        if kind is None or not _plain_in_pandas(described.get(name), name):
            return None
        if kind in ("int", "bool") and column.null_count:  # pandas makes them floats or objects
            return None
        kinds[name] = kind
        if name not in readable:
            continue
        if kind == "string":
            if column.null_count:
                missing.add(name)
            continue
        array = _to_numpy(column)
        if kind == "float" and (column.null_count or np.isnan(array).any()):
            missing.add(name)
            array = array.astype(np.float64, copy=False)
        values[name] = _compact(np.ascontiguousarray(array))
        values[name].flags.writeable = False
    return Table(arrow.num_rows, kinds, values, frozenset(missing))


