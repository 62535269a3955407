"""The paper's protocol at the analyst: noisy scores, the distributed ROC-GLM and exact q-protected answers."""

from analyst.protocols.paper.protocol import (PAPER_GUARANTEE, PaperDetail, PaperOptions, PaperProtocol,
                                              paper_calibration)
from analyst.protocols.paper.steps import PaperSession

__all__ = ["PAPER_GUARANTEE", "PaperDetail", "PaperOptions", "PaperProtocol", "PaperSession", "paper_calibration"]
