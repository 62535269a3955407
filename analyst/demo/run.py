"""``dsroc demo``: five TLS site daemons on GBSG2, validated through the network, beside the pooled truth.

The binary model (the source paper's analysis: patients censored before two years dropped) through the paper,
histogram and secagg protocols, and the Cox model as a survival model on every test patient.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dsroc
from analyst.demo.binary import (comparison_text, empirical_roc, per_site_lines, pooled_statistics, privacy_note,
                                 protocols_side_by_side)
from analyst.demo.daemons import running_daemons
from analyst.demo.gbsg2 import FEATURES, HORIZON_DAYS, OUTCOME, prepare_gbsg2
from analyst.demo.gbsg2_survival import prepare_gbsg2_survival
from analyst.demo.sites import DATASET, write_site_files
from analyst.demo.survival import survival_comparison, survival_references, validate_survival
from analyst.federation import Federation
from analyst.protocols import HistogramOptions, PaperOptions
from analyst.result.parts import num
from analyst.result.report import write_report
from analyst.session import Progress

__all__ = ["run_demo"]

_Q = 5  # the demo sites' privacy level
_MARKER = ".dsroc-demo"  # the demo only ever cleans a folder that carries this marker


def run_demo(*, out: str | Path | None = None, json_path: str | Path | None = None, n_patients: int | None = None,
             epsilon: float = 5.0, delta: float = 0.01, seed: int = 2024, progress: Progress | None = None,
             stream=None, verbose: bool = False) -> int:
    """Run the five-site GBSG2 demo; returns the exit status (0 on success).

    Parameters
    ----------
    out : path, optional
        Working folder (site data, certificates, configs, logs, the report); its demo sub-folders are
        recreated on each run. Default: a temporary folder, removed at the end (also on failure or
        Ctrl-C), so that no keys or tokens are left behind; only the printed results (and ``json_path``) remain.
    json_path : path, optional
        Also write the report JSON (``ValidationResult`` keys plus ``pooled``) here.
    n_patients : int, optional
        Use a random subset of the 686 patients.
    epsilon, delta : float
        Privacy level asked for per release.
    seed : int
        Seed of the data split.
    progress : callable, optional
        ``progress(step, site, message)``.
    stream : file, optional
        Where the results are printed (default stdout).
    verbose : bool
        Print every validation's whole summary and the privacy settings' explanation (``summary.txt`` of each report
        holds them); default: the paper protocol's one-screen summary beside the pooled truth, the three protocols
        side by side, the histogram protocol's per-site lines and the survival validation beside its references.
    """
    if json_path is not None and not Path(json_path).resolve().parent.is_dir():
        raise ValueError(f"--json {json_path}: its folder does not exist")
    options = dict(json_path=json_path, n_patients=n_patients, epsilon=epsilon, delta=delta, seed=seed,
                   progress=progress, stream=stream, verbose=verbose)
    if out is not None:
        return _run_demo(Path(out).resolve(), keep=True, **options)
    with tempfile.TemporaryDirectory(prefix="dsroc-demo-") as tmp:
        return _run_demo(Path(tmp), keep=False, **options)


def _run_demo(out: Path, *, keep: bool, json_path, n_patients, epsilon, delta, seed, progress, stream,
              verbose: bool = False) -> int:
    from site_node.rules.approvals import approve_model
    from site_node.interceptors.auth import hash_token, new_token
    from site_node.cli.init import federation_document, link_peers
    from site_node.security.pki import generate_dev_pki

    say = (lambda *a: print(*a, file=stream or sys.stdout, flush=True))
    t_start = time.perf_counter()
    if out.exists() and any(out.iterdir()) and not (out / _MARKER).exists():
        raise ValueError(f"--out {out} exists and was not made by `dsroc demo`; choose an empty or new folder")
    for sub in ("sites", "pki", "report", "report-histogram", "report-survival"):
        shutil.rmtree(out / sub, ignore_errors=True)  # a fresh run: new ledgers, certificates and tokens
    out.mkdir(parents=True, exist_ok=True)
    (out / _MARKER).write_text("made by dsroc demo\n")

    data = prepare_gbsg2(n_patients=n_patients, seed=seed)
    survival = prepare_gbsg2_survival(n_patients=n_patients, seed=seed)
    say(f"GBSG2: {len(data.train) + len(data.test) + data.n_excluded} patients, {data.n_excluded} censored before "
        f"{HORIZON_DAYS} days excluded; outcome '{OUTCOME}' = 1 when free of recurrence and death at "
        f"{HORIZON_DAYS} days.")
    say(f"Logistic model fitted on {len(data.train)} training patients; {len(data.test)} test patients over "
        f"{len(data.sites)} sites: {', '.join(str(len(s)) for s in data.sites)}.")
    say(f"Survival: a Cox model of recurrence-free survival fitted on {len(survival.train)} of all "
        f"{len(survival.train) + len(survival.test)} patients predicts "
        f"the {HORIZON_DAYS}-day risk of its {len(survival.test)} test patients, censored ones included, over the same "
        "five sites.")
    for k, frame in enumerate(data.sites, start=1):
        smallest = int(min((frame[OUTCOME] == 0).sum(), (frame[OUTCOME] == 1).sum()))
        if smallest < _Q:
            raise ValueError(f"with these patients site{k} would hold only {smallest} patients of one class; the "
                             f"sites release nothing about fewer than q = {_Q} patients: use a larger --n-patients")
    pki = generate_dev_pki(out / "pki")
    token = new_token()
    (out / "analyst.token").write_text(token + "\n", encoding="utf-8")
    os.chmod(out / "analyst.token", 0o600)
    configs = write_site_files(data, out / "sites", token_hash=hash_token(token), pki=pki, privacy_level=_Q,
                               survival=survival)
    link_peers([config for _, config, _ in configs])  # each site knows the others' release-signing keys
    for _, config, _ in configs:  # each site's administrator approves the model for the paper protocol
        approve_model(config, data.model_spec(), note="dsroc demo")
    entries = [{"name": name, "address": f"127.0.0.1:{port}", "token_file": "analyst.token",
                "ca_file": str(pki.ca_cert), "client_cert": str(pki.client_cert), "client_key": str(pki.client_key)}
               for name, _, port in configs]
    (out / "federation.toml").write_text(federation_document(entries, comment="Federation of the dsroc demo "
                                                                              "(generated)."), encoding="utf-8")

    with running_daemons(configs, pki=pki, token=token, progress=progress):
        t_ready = time.perf_counter()
        with Federation.from_file(out / "federation.toml") as fed:
            started = time.perf_counter()
            res = fed.validate(DATASET, OUTCOME, model=data.model(), epsilon=epsilon, delta=delta, protocol="paper",
                               options=PaperOptions(a0=0.5), progress=progress)
            t_validate = time.perf_counter() - started
            # per site (heterogeneity, forest plot) and the decision curve: post-processing of the same releases
            hist = fed.validate(DATASET, OUTCOME, model=data.model(), epsilon=epsilon, delta=delta,
                                protocol="histogram", options=HistogramOptions(by_site=True, decision_curve=True),
                                progress=progress)
            # the same counts summed by secure aggregation (the sites are each other's peers)
            secagg = fed.validate(DATASET, OUTCOME, model=data.model(), epsilon=epsilon, delta=delta,
                                  protocol="secagg", progress=progress)
            # the Cox model's two-year risk on every test patient: one survival release per site
            started = time.perf_counter()
            surv = validate_survival(fed, epsilon=epsilon, delta=delta, progress=progress)
            t_survival = time.perf_counter() - started
    t_stopped = time.perf_counter()
    surv_pooled, surv_binary = survival_references(survival)
    surv_text = survival_comparison(surv, surv_pooled, surv_binary)

    test = data.test
    scores = np.asarray(data.model().predict({f: test[f].to_numpy(float) for f in FEATURES}), dtype=float)
    labels = test[OUTCOME].to_numpy()
    pooled = pooled_statistics(scores, labels, grid=None, level=res.level)
    timing = {"validate_seconds": t_validate, "survival_seconds": t_survival, "startup_seconds": t_ready - t_start,
              "shutdown_seconds": t_stopped - t_ready - t_validate, "total_seconds": time.perf_counter() - t_start}
    comparison = comparison_text(res, pooled)
    extra = {"pooled": {k: (num(v) if isinstance(v, float) else v) for k, v in pooled.items()},
             "demo": {"epsilon": epsilon, "delta": delta, "seed": seed, "n_patients": n_patients,
                      "model": data.model_spec(), "timing": timing}}
    s0, s1 = scores[labels == 0], scores[labels == 1]
    fpr, tpr = empirical_roc(s0, s1)
    note = privacy_note(epsilon, delta)
    t = np.linspace(0.0, 1.0, 401)
    pooled_curve = dsroc.rocglm_curve(pooled["rocglm"]["params"], t)
    references = [(t, pooled_curve, f"pooled ROC-GLM, true scores (AUC {pooled['auc_rocglm']:.3f})"),
                  (fpr, tpr, f"pooled empirical (AUC {pooled['auc_empirical']:.3f})")]
    paths = write_report(res, out / "report", extra=extra, summary_extra=comparison + "\n\n" + note,
                         roc_references=references)
    hist_paths = write_report(hist, out / "report-histogram")
    surv_paths = write_report(surv, out / "report-survival", summary_extra=surv_text,
                              extra={"survival_pooled": surv_pooled, "survival_binary": surv_binary})
    protocols = protocols_side_by_side(res, hist, secagg, pooled)
    if json_path is not None:
        res.to_json(json_path, extra={**extra, "histogram_protocol": hist.to_dict(),
                                      "secagg_protocol": secagg.to_dict(), "survival_protocol": surv.to_dict(),
                                      "survival_pooled": surv_pooled, "survival_binary": surv_binary})
    timing["total_seconds"] = time.perf_counter() - t_start
    sections = ([res.summary(verbose=True), comparison, note, hist.summary(verbose=True), protocols,
                 surv.summary(verbose=True), surv_text] if verbose else
                [str(res), comparison, protocols, "\n".join(per_site_lines(hist)), surv_text])
    for text in sections:
        say("")
        say(text)
    say("")
    say(f"Timing: validate {t_validate:.2f} s (survival {t_survival:.2f} s); daemons started in "
        f"{timing['startup_seconds']:.2f} s "
        f"(including data preparation and certificates); whole demo {timing['total_seconds']:.2f} s.")
    if keep:
        say(f"Reports (report.json, summary.txt with every detail, figures): {paths['json'].parent} (paper protocol), "
            f"{hist_paths['json'].parent} (histogram), {surv_paths['json'].parent} (survival)"
            + (f"; JSON also at {json_path}" if json_path else ""))
    else:
        say("The demo's temporary folder (keys, token, ledgers, report) is removed; --out DIR keeps it and the plots"
            + (f"; JSON written to {json_path}" if json_path else "") + ".")
    if not verbose:
        say("Every validation's whole summary and the privacy settings explained: dsroc demo --verbose.")
    return 0
