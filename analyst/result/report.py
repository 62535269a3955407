"""The report folder of a validation, the same files for every protocol."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from analyst.display import CalibrationPlot, RocPlot, pyplot, validation_figure

__all__ = ["OPTIONAL_REPORT_FILES", "REPORT_FILES", "atomic_folder", "write_report"]

#: kind -> file name of everything ``write_report`` (and ``dsroc validate --out``) writes
REPORT_FILES = {"json": "report.json", "summary": "summary.txt", "figure": "validation.png", "roc": "roc.png",
                "calibration": "calibration.png"}
#: kind -> file name of the figures written only when the result holds them (``by_site``, ``decision_curve``,
#: ``strata``, ``compare``, a survival validation)
OPTIONAL_REPORT_FILES = {"forest": "forest.png", "decision_curve": "decision_curve.png", "subgroups": "subgroups.png",
                         "comparison": "comparison.png", "survival": "survival.png"}


def write_report(result, out_dir: str | Path, *, extra: Mapping[str, Any] | None = None, summary_extra: str = "",
                 roc_references: Sequence[Sequence] = ()) -> dict[str, Path]:
    """Write the report files of ``result`` into ``out_dir`` (created if missing): :data:`REPORT_FILES`.

    Parameters
    ----------
    result : ValidationResult
        Of any protocol.
    out_dir : path
    extra : mapping, optional
        Additional top-level keys of ``report.json`` (e.g. ``pooled`` in the demo).
    summary_extra : str
        Text appended to ``summary.txt``.
    roc_references : sequence of (fpr, tpr, label)
        Comparison curves on the ROC plots (the demo's pooled curves).

    Returns
    -------
    dict of file kind to path (``calibration`` only when the result holds a calibration curve; ``forest``,
    ``decision_curve``, ``subgroups`` and ``comparison`` only when it holds per-site estimates, a decision
    curve, subgroups or a model comparison).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {kind: out / name for kind, name in REPORT_FILES.items()}
    result.to_json(paths["json"], extra=extra)
    # the archived summary is the whole one (the screen gets one page: ``str(result)``)
    paths["summary"].write_text(result.summary(verbose=True) + ("\n\n" + summary_extra if summary_extra else "") + "\n",
                                encoding="utf-8")
    plt = pyplot()
    figures = {"figure": validation_figure(result, references=roc_references),
               "roc": RocPlot(result).plot(references=roc_references).figure_}
    if result.calibration is not None:
        figures["calibration"] = CalibrationPlot(result).plot().figure_
    else:
        del paths["calibration"]
    if result.heterogeneity is not None and result.heterogeneity.auc is not None:
        figures["forest"] = result.plot_forest()
    if result.decision_curve is not None:
        figures["decision_curve"] = result.plot_decision_curve()
    if result.subgroups is not None:
        figures["subgroups"] = result.plot_subgroups()
    if result.comparison is not None:
        figures["comparison"] = result.plot_comparison()
    if result.analysis == "survival":
        figures["survival"] = result.survival_display().figure()
    paths.update({kind: out / OPTIONAL_REPORT_FILES[kind] for kind in figures if kind in OPTIONAL_REPORT_FILES})
    for kind, fig in figures.items():
        fig.savefig(paths[kind], dpi=120)
        plt.close(fig)
    return paths


@contextlib.contextmanager
def atomic_folder(out: Path, *, force: bool):
    """Yield a temporary folder beside ``out`` that becomes ``out`` only when the block succeeds.

    Refuses a non-empty ``out`` unless ``force`` (then replaced at the end). On failure the temporary
    folder and any parent folders made for it are removed: nothing is left behind.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ValueError(f"--out {out} exists and is not empty; choose a new folder or add --force to replace it")
    made = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:
        for p in made:
            with contextlib.suppress(OSError):
                p.rmdir()
        raise ValueError(f"--out {out}: cannot create the report folder ({exc.strerror})") from None
    try:
        yield tmp
        if out.is_dir() and any(out.iterdir()):
            shutil.rmtree(out)  # only reached with --force
        os.replace(tmp, out)  # atomic; replaces an empty folder
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in made:  # innermost first
            with contextlib.suppress(OSError):
                p.rmdir()
        raise
