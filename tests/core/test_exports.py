"""The public names of ``dsroc`` and its subpackages: all importable, functions never shadowed by modules."""

import importlib
import subprocess
import sys
import types

import pytest

import dsroc
from dsroc import DisclosureError, require_privacy_level

SUBPACKAGES = [name for name in dsroc.__all__ if isinstance(getattr(dsroc, name), types.ModuleType)]


@pytest.mark.parametrize("package", ["dsroc"] + [f"dsroc.{name}" for name in SUBPACKAGES])
def test_every_exported_name_resolves(package):
    assert {"roc", "calibration", "privacy", "histogram", "pr", "mechanisms"} <= set(SUBPACKAGES)
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert not missing
    assert len(set(module.__all__)) == len(module.__all__)


def test_a_top_level_name_is_the_subpackage_object():
    assert dsroc.auc_ci is dsroc.roc.auc_ci is importlib.import_module("dsroc.roc.auc").auc_ci
    assert dsroc.histogram_validation is importlib.import_module("dsroc.histogram.validation").histogram_validation


def test_a_function_named_like_its_module_stays_the_function():
    importlib.import_module("dsroc.roc.rocglm_band")  # the import system sets the submodule on its package
    assert isinstance(dsroc.roc.rocglm_band, types.FunctionType)
    assert isinstance(dsroc.rocglm_band, types.FunctionType)


def test_importing_the_package_does_not_import_scipy():
    code = "import sys, dsroc; from dsroc import calibration_edges; print('scipy.optimize' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_privacy_level_refuses_below_q_without_saying_the_count():
    require_privacy_level(5, 5, "the Brier parts")  # exactly q patients: allowed
    with pytest.raises(DisclosureError) as info:
        require_privacy_level(3, 7, "the Brier parts")
    message = str(info.value)
    assert "privacy level" in message and "the Brier parts" in message and "q = 7" in message
    assert "3" not in message
