"""The site's data: dataset stores and their columns, score sources, and populations."""

# Not table_reader: it runs as ``python -m site_node.data.table_reader``, which must not find it imported already.

from .datasets import (DatasetStore, Table, feature_values, open_table, outcome_values, read_table, score_values,
    strata_values)
from .populations import populations, require_declared_populations, suspected_shared_patients
from .scores import MAX_ABS_COEFFICIENT, ScoreSpec, compute_scores

__all__ = ["DatasetStore", "Table", "feature_values", "open_table", "outcome_values", "read_table", "score_values",
           "strata_values", "populations", "require_declared_populations", "suspected_shared_patients",
           "MAX_ABS_COEFFICIENT", "ScoreSpec", "compute_scores"]
