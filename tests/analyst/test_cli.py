"""The dsroc CLI over real sites (validate, describe, budget) and the five-daemon demo as a subprocess."""

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from analyst.cli import main
from analyst.result.report import OPTIONAL_REPORT_FILES, REPORT_FILES

ROOT = Path(__file__).resolve().parents[2]


def write_federation(tmp_path, addresses, pki, token):
    (tmp_path / "analyst.token").write_text(token + "\n")
    lines = ["[options]", "timeout = 20", "retries = 1", ""]
    for k, a in enumerate(addresses):
        lines += ["[[sites]]", f'name = "s{k}"', f'address = "{a}"', 'token_file = "analyst.token"',
                  f'ca_file = "{pki.ca_cert}"', ""]
    path = tmp_path / "federation.toml"
    path.write_text("\n".join(lines))
    return path


def test_validate_writes_a_report_folder(tmp_path, five_sites, pki, helpers, capsys):
    _, addresses, _ = five_sites
    fed = write_federation(tmp_path, addresses, pki, helpers.TOKEN)
    model = tmp_path / "model.json"
    model.write_text(json.dumps(helpers.MODEL))
    out = tmp_path / "report"
    rc = main(["validate", "--protocol", "paper", "--federation", str(fed), "--dataset", "test", "--outcome", "y", "--model", str(model),
               "--epsilon", "1", "--delta", "0.01", "--out", str(out), "--threshold", "0.5", "--a0", "0.6",
               "--sensitivity", "0.19", "--outside-study"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    for key in ("auc", "roc", "brier", "calibration", "privacy", "confusion", "test", "detail"):
        assert key in report
    helpers.check_schema(report)
    auc = report["auc"]
    assert auc["lower"] < auc["value"] < auc["upper"] and "rocglm" in report["detail"]
    assert report["confusion"]["tp"] > 0 and report["test"]["a0"] == 0.6
    for png in ("validation.png", "roc.png", "calibration.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    summary = (out / "summary.txt").read_text()
    assert f"{auc['value']:.4f}" in summary
    # (1, 0.01) at Delta = 0.19 is outside the study (refused without --outside-study) and not recommended: both
    # warnings in the report and the summary
    assert report["warnings"][0].startswith("outside the simulation study") and "tau = " in report["warnings"][0]
    assert "not among the settings" in report["warnings"][1]
    assert all(" ".join(w.split()) in " ".join(summary.split()) for w in report["warnings"])
    assert "[0.00, 0.10)" in summary and "[0.90, 1.00]" in summary and "logit-scale CI" in summary
    captured = capsys.readouterr()
    # one progress line per step (every site's with --verbose), the one-screen summary and where the report is
    assert "noisy release" in captured.err and "ROC-GLM fit" in captured.err
    assert len(captured.err.splitlines()) <= 8 and captured.err.count("noisy release") == 1
    printed = captured.out.split("\n\nvalidate took")[0]
    warned = printed.split("\nWarnings\n")[1].splitlines()  # this request's two warnings take their lines
    assert len(printed.splitlines()) - len(warned) <= 25 and f"{auc['value']:.3f}" in printed
    assert "[0.00, 0.10)" not in printed

    assert main(["describe", "--federation", str(fed)]) == 0
    assert "dataset 'test'" in capsys.readouterr().out
    assert main(["budget", "--federation", str(fed), "--dataset", "test", "--json"]) == 0
    budget = json.loads(capsys.readouterr().out)
    assert set(budget) == {f"s{k}" for k in range(5)} and budget["s0"]["releases"] >= 1


def test_cli_errors_are_clear(tmp_path, five_sites, pki, helpers, capsys):
    _, addresses, _ = five_sites
    fed = write_federation(tmp_path, addresses, pki, "not-the-token")
    rc = main(["budget", "--federation", str(fed), "--dataset", "test"])
    assert rc == 3 and "site 's0': UNAUTHENTICATED" in capsys.readouterr().err
    rc = main(["describe", "--federation", str(tmp_path / "missing.toml")])
    assert rc == 2 and "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["validate", "--federation", str(fed)])  # argparse: required options missing
    # bad input fails before any site is asked (the wrong token would otherwise give exit 3)
    (tmp_path / "a_file").write_text("")
    common = ["validate", "--federation", str(fed), "--dataset", "test", "--outcome", "y", "--score", "pred"]
    rc = main(common + ["--epsilon", "5", "--delta", "0.01", "--out", str(tmp_path / "a_file" / "report")])
    assert rc == 2 and "cannot create the report folder" in capsys.readouterr().err
    rc = main(common + ["--epsilon", "-1", "--delta", "0.01", "--out", str(tmp_path / "r")])
    assert rc == 2 and "epsilon must be a positive finite number" in capsys.readouterr().err
    # a flag of the other protocol's options is refused (the wrong token shows no site was asked)
    ok = ["--epsilon", "5", "--delta", "0.01", "--out", str(tmp_path / "r")]
    rc = main(common + ok + ["--ci-method", "wald", "--grid", "20"])
    assert rc == 2 and "--ci-method, --grid: not an option of --protocol histogram" in capsys.readouterr().err
    rc = main(common + ok + ["--protocol", "paper", "--spacing", "logit"])
    assert rc == 2 and "--spacing: not an option of --protocol paper" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    rc = main(["recommend", "--sensitivity", "0.1", "--tolerance", "0.5"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "tolerance 0.5 is not in" in err


def test_demo_runs_five_tls_daemons_and_exits_0(tmp_path):
    out, js = tmp_path / "demo", tmp_path / "demo.json"
    proc = subprocess.run([sys.executable, "-m", "analyst", "demo", "--out", str(out), "--json", str(js), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(js.read_text())
    assert set(report) >= {"auc", "roc", "brier", "calibration", "privacy", "detail", "pooled", "histogram_protocol"}
    assert report["n"]["total"] == report["pooled"]["n"] == 249  # 686 - 63 censored early, 40 % test split
    assert report["brier"]["value"] == pytest.approx(report["pooled"]["brier"], abs=1e-12)  # Brier carries no noise
    assert abs(report["auc"]["value"] - report["pooled"]["auc_empirical"]) < 0.15
    assert set(report["histogram_protocol"]) == set(report) - {"pooled", "demo", "histogram_protocol", "secagg_protocol",
                                                               "survival_protocol", "survival_pooled", "survival_binary"}
    # the Cox model as a survival model on every test patient: the same report shape, censored patients kept
    surv, surv_pooled, surv_binary = report["survival_protocol"], report["survival_pooled"], report["survival_binary"]
    assert surv["analysis"] == "survival" and surv["horizon"] == 730 and set(surv) == set(report["histogram_protocol"])
    assert surv_pooled["n"] == 274 and surv_binary["n"] == 274 - surv_binary["dropped"] and surv_binary["dropped"] > 0
    assert abs(surv["n"]["total"] - 274) < 25 and abs(surv["auc"]["value"] - surv_pooled["auc"]) < 0.1
    assert abs(surv["detail"]["harrell_c"]["value"] - surv_pooled["harrell_c"]) < 0.06
    assert "pooled reference (all test data)" in proc.stdout and "binary analysis (drops" in proc.stdout
    # secure aggregation at the same epsilon: the same report shape, summed noise well below the histogram's
    secagg, hist = report["secagg_protocol"], report["histogram_protocol"]
    assert set(secagg) == set(hist) and secagg["protocol"] == "secagg"
    assert secagg["detail"]["sigma"] < 0.6 * hist["detail"]["sigma"]
    assert abs(secagg["auc"]["value"] - report["pooled"]["auc_empirical"]) < 0.15
    assert "  secagg     AUC" in proc.stdout
    assert all(p["sensitivity_rule"] == "model" and 0.05 < p["sensitivity"] < 0.5 for p in report["privacy"].values())
    assert "Distributed (through the network) vs pooled" in proc.stdout
    pooled_h = report["pooled"]["calibration"]
    assert sum(b["n"] or 0 for b in pooled_h["bins"]) == 249
    assert pooled_h["oe"]["lower"] < pooled_h["oe"]["value"] < pooled_h["oe"]["upper"]
    assert "  O/E  " in proc.stdout and "  cal. slope  " in proc.stdout
    assert (out / "report-survival" / "survival.png").read_bytes()[:4] == b"\x89PNG"
    for folder in ("report", "report-histogram", "report-survival"):  # one report shape for every protocol
        assert set(REPORT_FILES.values()) <= {p.name for p in (out / folder).iterdir()}
    # the histogram validation of the demo also reports per site and a decision curve, and nothing else
    assert sorted(p.name for p in (out / "report-histogram").iterdir()) == sorted(
        [*REPORT_FILES.values(), OPTIONAL_REPORT_FILES["forest"], OPTIONAL_REPORT_FILES["decision_curve"]])
    assert "AUC pooled across sites" in proc.stdout and "Decision curve at" in proc.stdout
    # one screen per part: the paper protocol's summary, the comparisons, per site, survival (was ~250 lines)
    assert len(proc.stdout.splitlines()) <= 100 and "dsroc demo --verbose" in proc.stdout
    # the daemons were stopped cleanly (SIGTERM): each log ends without a traceback
    for k in range(1, 6):
        assert "Traceback" not in (out / "sites" / f"site{k}" / "daemon.log").read_text()
    # the binary and the survival entries hold the same patients: every release charged to one population's budget
    import sqlite3

    for k in range(1, 6):
        with contextlib.closing(sqlite3.connect(out / "sites" / f"site{k}" / "state" / "ledger.sqlite")) as db:
            charged = db.execute("SELECT DISTINCT dataset, population FROM releases").fetchall()
        assert {d for d, _ in charged} == {"gbsg2_test", "gbsg2_survival_test"} and {p for _, p in charged} == {"gbsg2-test"}
    # a second run into the same folder is allowed (it was made by the demo); a foreign folder is not
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep")
    proc = subprocess.run([sys.executable, "-m", "analyst", "demo", "--out", str(foreign), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and (foreign / "precious.txt").exists()


def test_demo_refuses_too_few_patients_before_starting_daemons(tmp_path, capsys):
    rc = main(["demo", "--out", str(tmp_path / "d"), "--n-patients", "200", "--quiet"])
    assert rc == 2 and "q = 5" in capsys.readouterr().err
    assert not (tmp_path / "d" / "sites").exists()


def test_version_imports_no_protocol_grpc_or_scipy():
    """`dsroc --version` in a fresh interpreter: the version, without the analyst's protocols, gRPC or scipy (the
    lazy package exports; 1.4 CPU-s before)."""
    code = ("import sys\nfrom analyst.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('analyst.federation', 'analyst.protocols', 'grpc', 'scipy.stats', 'scipy')"
            " if m in sys.modules))")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    first, imported = out.stdout.strip().splitlines()
    assert first.startswith("dsroc ") and imported == "[]"


def test_the_spacing_help_states_the_first_stages_share_the_code_uses():
    """The histogram protocol's first stage takes LAPLACE_STAGE1_SHARE of the stages' shares: with the default score
    sums exactly a fifth of epsilon, which --spacing's help says (it said a tenth)."""
    from analyst.cli import parser
    from dsroc.histogram.stages import laplace_two_stage_plan

    stages = laplace_two_stage_plan(5.0, 0.01, score_sums=True)
    assert stages.epsilon1 == pytest.approx(5.0 / 5) and stages.epsilon1 + stages.epsilon2 == pytest.approx(5.0)
    validate = parser()._subparsers._group_actions[0].choices["validate"]
    spacing = next(a for a in validate._actions if "--spacing" in a.option_strings)
    assert "histogram: a fifth of epsilon" in " ".join(spacing.help.split())
