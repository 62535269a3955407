"""docs/notebooks/validation.ipynb executed in a real Jupyter kernel against five real TLS sites: both protocols
render as HTML, give tables with to_frame and one figure with plot()."""

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def _outputs(cell, kind):
    return [o["data"][kind] for o in cell.get("outputs", []) if kind in o.get("data", {})]


def test_the_docs_notebook_runs_both_protocols_on_real_sites(tmp_path, five_sites, pki, helpers, monkeypatch):
    _, addresses, _ = five_sites
    (tmp_path / "token").write_text(helpers.TOKEN)
    lines = []
    for k, a in enumerate(addresses):
        lines += ["[[sites]]", f'name = "s{k}"', f'address = "{a}"', 'token_file = "token"',
                  f'ca_file = "{pki.ca_cert}"', ""]
    (tmp_path / "federation.toml").write_text("\n".join(lines))
    monkeypatch.setenv("DSROC_FEDERATION", str(tmp_path / "federation.toml"))
    # the kernel imports this checkout, as the tests do
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(ROOT / "docs" / "notebooks" / "validation.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed without outputs
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    by_source = {c.source.splitlines()[-1]: c for c in code}
    for name, protocol in (("res", "histogram"), ("paper", "paper")):
        page = _outputs(by_source[name], "text/html")
        assert len(page) == 1 and f"{protocol} protocol" in page[0] and page[0].count("<table") == 3
        assert "AUC (" in page[0] and "calibration slope" in page[0]
    calibration = _outputs(by_source['res.to_frame("calibration")'], "text/html")[0]
    assert "mean_predicted" in calibration and "observed_upper" in calibration
    assert "noise_sd" in _outputs(by_source['paper.to_frame("sites")'], "text/html")[0]
    assert "tpr_upper" in _outputs(by_source['paper.to_frame("roc").head()'], "text/html")[0]
    assert len(_outputs(by_source["fig = res.plot()"], "image/png")) == 1  # one figure, shown once
