"""The ServerApp an analyst runs with ``flwr run``: ``analyst.flower.server_app:app``.

Its run config (``[tool.flwr.app.config]`` of the app bundle, or ``flwr run --run-config``): ``federation`` (a
federation file: each site's name and the analyst's token there; addresses are not used), ``dataset``,
``outcome``, ``score``, ``epsilon``, ``delta``, ``out`` (where to write ``report.json``) and optionally
``timeout`` (seconds per call). The validation is :meth:`analyst.Federation.validate` with the default
histogram protocol, over :class:`analyst.flower.FlowerConnection` transports.
"""

from __future__ import annotations

from pathlib import Path
from time import perf_counter

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from analyst.config import load_federation_file

from .connection import flower_federation

__all__ = ["app", "validate_run"]

app = ServerApp()


def validate_run(grid: Grid, run_config) -> Path:
    """Validate as ``run_config`` asks through ``grid``; the path of the report written."""
    sites, _ = load_federation_file(run_config["federation"])
    start = perf_counter()
    with flower_federation(grid, sites, timeout=float(run_config.get("timeout", 300.0))) as federation:
        result = federation.validate(str(run_config["dataset"]), str(run_config["outcome"]),
                                     score=str(run_config["score"]), epsilon=float(run_config["epsilon"]),
                                     delta=float(run_config["delta"]))
        wall = perf_counter() - start
        messages = {c.name: {"messages": c.messages, "seconds_per_message": c.seconds / max(c.messages, 1)}
                    for c in federation.connections}
    out = Path(str(run_config["out"]))
    out.mkdir(parents=True, exist_ok=True)
    result.to_json(out / "report.json", extra={"engine": {"name": "flower", "wall_seconds": wall, "sites": messages}})
    return out / "report.json"


@app.main()
def main(grid: Grid, context: Context) -> None:
    validate_run(grid, context.run_config)
