"""Finer partitions of one histogram release: the strata of a covariate the policy lists, or a second model's bins.

Either way every patient still falls in exactly one cell of one class, so adding or removing a patient
changes one count by one: the release keeps the l2-sensitivity, the noise and the charge of a plain
histogram release (docs/privacy.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ...config import Policy
from ...errors import InvalidArgument, PermissionDenied

__all__ = ["Partition", "strata_partition", "joint_partition", "check_cells", "part_index", "partition_fingerprint"]


@dataclass(frozen=True)
class Partition:
    """How each bin of a histogram release is split further.

    Attributes
    ----------
    kind : {"strata", "joint"}
    name : str
        The strata column, or the second model's score source (its canonical key).
    cuts : tuple of float
        ``"strata"``: the policy's cut points; stratum ``k`` holds ``cuts[k-1] <= x < cuts[k]``.
    edges : tuple of float
        ``"joint"``: the second model's grid.
    """

    kind: str
    name: str
    cuts: tuple = ()
    edges: tuple = ()

    @property
    def parts(self) -> int:
        """Cells each bin is split into: the strata, or the second model's bins."""
        return len(self.cuts) + 1 if self.kind == "strata" else len(self.edges) - 1

    def key(self) -> dict:
        """What the partition adds to the release's canonical request."""
        if self.kind == "strata":
            return {"strata": {"column": self.name, "cuts": list(self.cuts)}}
        return {"compare": {"source": self.name, "edges": list(self.edges)}}


def strata_partition(policy: Policy, column: str) -> Partition:
    """The strata of ``column`` at the policy's cut points; PERMISSION_DENIED when the policy does not list it.

    Refused before the data are looked at, so the refusal says nothing about the dataset's columns.
    """
    cuts = policy.strata_cuts(column)
    if cuts is None:
        raise PermissionDenied(f"policy: strata_column {column!r} is not a column this site releases strata of "
                               f"(policy.strata lists {[c for c, _ in policy.strata]})")
    return Partition("strata", column, tuple(cuts))


def joint_partition(source: str, edges) -> Partition:
    """The bins of a second model's scores (source key ``source``) on its grid ``edges``."""
    return Partition("joint", source, edges=tuple(float(e) for e in edges))


def check_cells(policy: Policy, n_bins: int, partition: Partition) -> None:
    """Refuse (INVALID_ARGUMENT naming the limit) more than ``policy.histogram_max_cells`` cells per class."""
    cells = n_bins * partition.parts
    if cells > policy.histogram_max_cells:
        what = "strata" if partition.kind == "strata" else "bins of the second model"
        raise InvalidArgument(f"{n_bins} bins x {partition.parts} {what} = {cells} cells per class is above this "
                              f"site's limit of {policy.histogram_max_cells} (policy: histogram_max_cells); ask for "
                              "fewer bins")


def part_index(partition: Partition, values: np.ndarray) -> np.ndarray:
    """Each patient's part: its stratum (``values`` of the strata column) or its bin under the second model
    (``values`` its scores, clipped into the grid as the first model's are)."""
    import dsroc

    values = np.asarray(values, dtype=np.float64)
    if partition.kind == "strata":
        return np.searchsorted(np.asarray(partition.cuts), values, side="right").astype(np.int64)
    return dsroc.bin_index(values, np.asarray(partition.edges)).astype(np.int64)


def partition_fingerprint(fingerprint: str, labels: np.ndarray, cells: np.ndarray, n_cells: int) -> str:
    """The data fingerprint of a partitioned release: the scores' (``fingerprint``) and the exact count of every cell
    of each class, so a replay after a change of the strata column or of the second model's scores is refused."""
    y = np.asarray(labels, dtype=np.int64)
    counts = np.bincount(y * n_cells + np.asarray(cells, dtype=np.int64), minlength=2 * n_cells)
    h = hashlib.sha256(fingerprint.encode("ascii"))
    h.update(counts.astype("<i8").tobytes())
    return h.hexdigest()
