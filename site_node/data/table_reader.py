"""Read datasets in a short-lived helper process, so that the daemon itself never imports pandas, pyarrow or SQLAlchemy.

Those libraries would stay in the daemon's memory for good (about 100 MB, more than a million
patients' scores take) while they are needed once per dataset. The daemon starts
``python -m site_node.data.table_reader``, writes the datasets' configs to its stdin as JSON (the database
URL with its password goes through the pipe, not the command line) and reads back, per dataset, one JSON
header line and the raw bytes of each readable column, straight into numpy arrays (no copy of the data on
the daemon's side). The helper's error output (a traceback naming the file or the driver's message)
is kept for the daemon's log.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config.site_config import DatasetConfig
from .tables import Table, read_table

__all__ = ["read_table_in_helper", "read_tables_in_helper", "summaries_in_helper", "main"]

_FIELDS = ("name", "format", "path", "url", "table", "query", "outcomes", "scores", "model_columns", "strata_columns",
           "time_columns")


def _request(config: DatasetConfig) -> dict:
    fields = {name: getattr(config, name) for name in _FIELDS}
    fields["path"] = None if config.path is None else str(config.path)
    return fields


def _read_exactly(stream, array: np.ndarray) -> None:
    view = memoryview(array).cast("B")
    done = 0
    while done < view.nbytes:
        got = stream.readinto(view[done:])
        if not got:
            raise EOFError("the dataset reader process ended before sending every column")
        done += got


def read_tables_in_helper(configs: Sequence[DatasetConfig]) -> list[Table | RuntimeError]:
    """Read every dataset of ``configs`` in one helper process (same Python, same site_node), in order.

    One process for many datasets: a helper's start and its pandas import take about a second, which a site
    with a hundred datasets paid a hundred times before it was ready. Returns a :class:`Table` per config, or in
    its place a ``RuntimeError`` with the helper's error output (a traceback naming the file or the driver's
    message) for a dataset it cannot read; the others are read regardless.
    """
    configs = list(configs)
    if not configs:
        return []
    env = _helper_env()
    out: list[Table | RuntimeError] = []
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([sys.executable, "-m", "site_node.data.table_reader"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errors, env=env)
        try:
            proc.stdin.write(json.dumps([_request(config) for config in configs]).encode("utf-8"))
            proc.stdin.close()
            for _ in configs:
                line = proc.stdout.readline()
                if not line:
                    break
                header = json.loads(line)
                if "error" in header:
                    out.append(RuntimeError(f"the dataset reader could not read it:\n{header['error']}"))
                    continue
                values = {}
                try:
                    for name, dtype, count in header["values"]:
                        values[name] = np.empty(count, dtype=np.dtype(dtype))
                        _read_exactly(proc.stdout, values[name])
                        values[name].flags.writeable = False
                except EOFError:
                    break
                out.append(Table(header["n_rows"], dict(header["kinds"]), values, frozenset(header["missing"])))
        finally:
            proc.stdout.close()
            code = proc.wait()
        if len(out) < len(configs):  # the helper ended early: what it did not send failed with its output
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip()
            out += [RuntimeError(f"the dataset reader process failed (exit status {code}):\n{message}")] * (
                len(configs) - len(out))
    return out


def _helper_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])  # the folder holding site_node, installed or not
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def summaries_in_helper(configs: Sequence[DatasetConfig]) -> dict:
    """The look-alike summaries (:func:`site_node.data.populations.summarize`) of ``configs``' tables, by name, made
    in one helper process, so that reading whole tables with pandas leaves nothing in the daemon's memory; a table
    the helper cannot read is left out (its first request says why). Raises ``RuntimeError`` with the helper's
    error output when the helper itself fails."""
    configs = list(configs)
    if not configs:
        return {}
    proc = subprocess.run([sys.executable, "-m", "site_node.data.table_reader", "--summaries"],
                          input=json.dumps([_request(config) for config in configs]).encode("utf-8"),
                          capture_output=True, env=_helper_env(), check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the dataset reader process failed (exit status {proc.returncode}) while comparing the "
                           f"datasets' rows:\n{proc.stderr.decode('utf-8', 'replace').strip()}")
    return pickle.loads(proc.stdout)  # our own child's answer, from the same code


def read_table_in_helper(config: DatasetConfig) -> Table:
    """Read ``config``'s dataset in a helper process and return its :class:`Table` (:func:`read_tables_in_helper`).

    Raises ``RuntimeError`` with the helper's error output when it cannot read the dataset.
    """
    (table,) = read_tables_in_helper([config])
    if isinstance(table, RuntimeError):
        raise table
    return table


def _config(fields: dict) -> DatasetConfig:
    return DatasetConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def _summaries(requests: list) -> dict:
    """The helper's side of :func:`summaries_in_helper`: one table in memory at a time, only its summary kept."""
    from .populations import summarize
    from .tables import open_table

    summaries = {}
    for fields in requests:
        try:
            summaries[fields["name"]] = summarize(open_table(_config(fields)).load())
        except Exception:  # noqa: BLE001 - an unreadable entry answers nothing; its request says why
            traceback.print_exc()
    return summaries


def main() -> int:
    """The helper's side: read each dataset listed on stdin; write its header line and its columns to stdout, or a
    header line with the error (the traceback also to stderr) for one it cannot read (with ``--summaries``: the
    pickled look-alike summaries of those tables instead)."""
    out = sys.stdout.buffer
    requests = json.loads(sys.stdin.buffer.read())
    if "--summaries" in sys.argv[1:]:
        out.write(pickle.dumps(_summaries(requests)))
        out.flush()
        return 0
    for fields in requests:
        try:
            table = read_table(_config(fields))
        except Exception:  # noqa: BLE001 - reported to the daemon, which logs it for the administrator
            error = traceback.format_exc()
            sys.stderr.write(error)
            out.write(json.dumps({"error": error}).encode("utf-8") + b"\n")
            continue
        header = {"n_rows": table.n_rows, "kinds": list(table.kinds.items()), "missing": sorted(table.missing),
                  "values": [[name, v.dtype.str, v.size] for name, v in table.values.items()]}
        out.write(json.dumps(header).encode("utf-8") + b"\n")
        for v in table.values.values():
            out.write(memoryview(v).cast("B"))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
