"""The site's data: dataset stores and their columns, score sources, and populations."""

# Not table_reader: it runs as ``python -m site_node.data.table_reader``, which must not find it imported already.
# Nothing is imported here until asked for: that helper process reads tables (site_node.data.tables) and must not
# load grpc, cryptography or the scores' statistics with them.

from importlib import import_module

_WHERE = {"DatasetStore": "datasets", "feature_values": "datasets", "outcome_values": "datasets",
          "score_values": "datasets", "strata_values": "datasets", "Table": "tables", "open_table": "tables",
          "read_table": "tables", "populations": "populations", "require_declared_populations": "look_alikes",
          "suspected_shared_patients": "populations", "MAX_ABS_COEFFICIENT": "scores", "ScoreSpec": "scores",
          "compute_scores": "scores"}

__all__ = ["DatasetStore", "Table", "feature_values", "open_table", "outcome_values", "read_table", "score_values",
           "strata_values", "populations", "require_declared_populations", "suspected_shared_patients",
           "MAX_ABS_COEFFICIENT", "ScoreSpec", "compute_scores"]


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
