"""Read a dataset in a short-lived helper process, so that the daemon itself never imports pandas, pyarrow or SQLAlchemy.

Those libraries would stay in the daemon's memory for good (about 100 MB, more than a million
patients' scores take) while they are needed once per dataset. The daemon starts
``python -m site_node.table_reader``, writes the dataset's config to its stdin as JSON (the database
URL with its password goes through the pipe, not the command line) and reads back one JSON header
line and the raw bytes of each readable column, straight into numpy arrays (no copy of the data on
the daemon's side). The helper's error output (a traceback naming the file or the driver's message)
is kept for the daemon's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .config import DatasetConfig
from .datasets import Table, read_table

__all__ = ["read_table_in_helper", "main"]

_FIELDS = ("name", "format", "path", "url", "table", "query", "outcomes", "scores", "model_columns", "strata_columns")


def _request(config: DatasetConfig) -> bytes:
    fields = {name: getattr(config, name) for name in _FIELDS}
    fields["path"] = None if config.path is None else str(config.path)
    return json.dumps(fields).encode("utf-8")


def _read_exactly(stream, array: np.ndarray) -> None:
    view = memoryview(array).cast("B")
    done = 0
    while done < view.nbytes:
        got = stream.readinto(view[done:])
        if not got:
            raise EOFError("the dataset reader process ended before sending every column")
        done += got


def read_table_in_helper(config: DatasetConfig) -> Table:
    """Read ``config``'s dataset in a helper process (same Python, same site_node) and return its :class:`Table`.

    Raises ``RuntimeError`` with the helper's error output when it cannot read the dataset.
    """
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])  # the folder holding site_node, installed or not
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([sys.executable, "-m", "site_node.table_reader"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errors, env=env)
        try:
            proc.stdin.write(_request(config))
            proc.stdin.close()
            line = proc.stdout.readline()
            table = None
            if line:
                header = json.loads(line)
                values = {}
                for name, dtype, count in header["values"]:
                    values[name] = np.empty(count, dtype=np.dtype(dtype))
                    _read_exactly(proc.stdout, values[name])
                    values[name].flags.writeable = False
                table = Table(header["n_rows"], dict(header["kinds"]), values, frozenset(header["missing"]))
        finally:
            proc.stdout.close()
            code = proc.wait()
        if code != 0 or table is None:
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip()
            raise RuntimeError(f"the dataset reader process failed (exit status {code}):\n{message}")
    return table


def main() -> int:
    """The helper's side: read the dataset named on stdin, write the header line and the columns to stdout."""
    fields = json.loads(sys.stdin.buffer.read())
    table = read_table(DatasetConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}))
    header = {"n_rows": table.n_rows, "kinds": list(table.kinds.items()), "missing": sorted(table.missing),
              "values": [[name, v.dtype.str, v.size] for name, v in table.values.items()]}
    out = sys.stdout.buffer
    out.write(json.dumps(header).encode("utf-8") + b"\n")
    for v in table.values.values():
        out.write(memoryview(v).cast("B"))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
