"""The README's Python snippet and docs/notebooks/validation.ipynb, exactly as printed, against the federation that
``dsroc-site init --federation 2 fed`` writes (two TLS daemons on loopback, its ``sample`` dataset)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from site_node.cli.init import init_federation
from site_node.testing import Daemon

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@pytest.fixture(scope="module")
def init_sites(tmp_path_factory):
    """``dsroc-site init --federation 2 fed`` in a fresh folder, both sites served; yields that folder."""
    root = tmp_path_factory.mktemp("clone")
    made = init_federation(root / "fed", 2)
    daemon = Daemon([str(s.config) for s in made.sites], program=["dsroc-site"], env=ENV, cwd=root).wait_serving()
    try:
        yield root
    finally:
        assert daemon.stop(timeout=20) == 0


def _outputs(cell, kind):
    return [o["data"][kind] for o in cell.get("outputs", []) if kind in o.get("data", {})]


def test_the_readme_python_snippet_runs_as_printed_on_inits_sites(init_sites):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Validating a model (analyst)"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", snippet + "\nprint('AUC', res.auc)"], cwd=init_sites,
                       env=dict(ENV, MPLBACKEND="Agg"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "histogram protocol" in r.stdout and (init_sites / "report.json").is_file()
    auc = float(r.stdout.split("AUC ")[-1])
    assert 0.5 < auc < 0.9  # init's synthetic model discriminates, and the noisy estimate says so


def test_the_docs_notebook_runs_as_printed_on_inits_sites(init_sites, monkeypatch):
    monkeypatch.setenv("DSROC_FEDERATION", str(init_sites / "fed" / "federation.toml"))
    for name, value in ENV.items():  # the kernel imports this checkout, as the tests do
        monkeypatch.setenv(name, value)
    nb = nbformat.read(ROOT / "docs" / "notebooks" / "validation.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed without outputs
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(init_sites)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    by_source = {c.source.splitlines()[-1]: c for c in code}
    for name in ("res", "sites"):
        page = _outputs(by_source[name], "text/html")
        assert len(page) == 1 and "histogram protocol" in page[0] and page[0].count("<table") >= 3
        assert "AUC (" in page[0] and "calibration slope" in page[0]
    calibration = _outputs(by_source['res.to_frame("calibration")'], "text/html")[0]
    assert "mean_predicted" in calibration and "observed_upper" in calibration
    assert "site1" in _outputs(by_source['sites.to_frame("sites")'], "text/html")[0]
    assert "tpr" in _outputs(by_source['sites.to_frame("roc").head()'], "text/html")[0]
    assert len(_outputs(by_source["fig = res.plot()"], "image/png")) == 1  # one figure, shown once
