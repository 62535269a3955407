"""A report folder: report.json, summary.txt, roc.png and calibration.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from analyst.display import CalibrationDisplay, RocCurveDisplay, pyplot
from analyst.histogram import HistogramResult
from analyst.result import ValidationResult

__all__ = ["write_report"]


def write_report(result: ValidationResult | HistogramResult, out_dir: str | Path, *, extra: Mapping[str, Any] | None = None,
                 summary_extra: str = "", roc_references: Sequence[Sequence] = ()) -> dict[str, Path]:
    """Write the report files of ``result`` into ``out_dir`` (created if missing).

    Parameters
    ----------
    result : ValidationResult
    out_dir : path
    extra : mapping, optional
        Additional top-level keys of ``report.json`` (e.g. ``pooled`` in the demo).
    summary_extra : str
        Text appended to ``summary.txt``.
    roc_references : sequence of (fpr, tpr, label)
        Comparison curves on the ROC plot (the demo's pooled ROC-GLM and empirical curve).

    Returns
    -------
    dict of file kind to path: ``json``, ``summary``, ``roc``, ``calibration``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(result, HistogramResult):  # histogram protocol: one figure, titled with its guarantee
        paths = {"json": out / "report.json", "summary": out / "summary.txt", "plots": out / "validation.png"}
        paths["json"].write_text(result.to_json() + "\n", encoding="utf-8")
        paths["summary"].write_text(str(result) + ("\n\n" + summary_extra if summary_extra else "") + "\n",
                                    encoding="utf-8")
        axes = result.plot()
        axes[0].figure.savefig(paths["plots"], dpi=120, bbox_inches="tight")
        pyplot().close(axes[0].figure)
        return paths
    paths = {"json": out / "report.json", "summary": out / "summary.txt",
             "roc": out / "roc.png", "calibration": out / "calibration.png"}
    result.to_json(paths["json"], extra=extra)
    paths["summary"].write_text(str(result) + ("\n\n" + summary_extra if summary_extra else "") + "\n",
                                encoding="utf-8")
    plt = pyplot()
    roc = RocCurveDisplay.from_result(result).plot(references=roc_references)
    roc.figure_.savefig(paths["roc"], dpi=120, bbox_inches="tight")
    plt.close(roc.figure_)
    cal = CalibrationDisplay.from_result(result).plot()
    cal.figure_.savefig(paths["calibration"], dpi=120, bbox_inches="tight")
    plt.close(cal.figure_)
    return paths
