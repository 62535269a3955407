"""A site's shared scored data keeps its class scores sorted only: the split in the data's order is made on demand."""

from __future__ import annotations

import numpy as np

from site_node.data.scores import ScoreSpec
from site_node.sessions import ScoredData


def test_scored_data_keeps_the_sorted_classes_and_counts_them_without_a_kept_split():
    rng = np.random.default_rng(7)
    scores = rng.uniform(size=1001)
    labels = (rng.uniform(size=1001) < 0.3).astype(np.int8)
    data = ScoredData("d", "y", ScoreSpec(column="s"), scores, labels, (0.0, 1.0))
    assert (data.n_negatives, data.n_positives) == (int((labels == 0).sum()), int((labels == 1).sum()))
    np.testing.assert_array_equal(data.negatives, [s for s, y in zip(scores, labels) if y == 0])  # the data's order
    np.testing.assert_array_equal(data.positives, [s for s, y in zip(scores, labels) if y == 1])
    data.fingerprint  # noqa: B018 - sorts both classes
    np.testing.assert_array_equal(data.sorted_negatives, sorted(s for s, y in zip(scores, labels) if y == 0))
    np.testing.assert_array_equal(data.sorted_positives, sorted(s for s, y in zip(scores, labels) if y == 1))
    kept = [v for k, v in vars(data).items() if isinstance(v, np.ndarray) and k not in ("scores", "labels")]
    # what stays beside the data's own columns: the two sorted classes, n scores in all, not 2 n
    assert sum(v.nbytes for v in kept) == scores.nbytes
