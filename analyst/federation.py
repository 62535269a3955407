"""The analyst's entry point: a set of sites, their descriptions and budgets, and ``validate``."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from google.protobuf.json_format import MessageToDict

import dsroc
from dsroc.v1 import site_pb2 as pb
from dsroc.v1.site_pb2_grpc import SiteServiceStub

from analyst.config import SiteConfig, load_federation_file
from analyst.connection import SiteConnection, SiteError, fan_out_partial
from analyst.histogram import HistogramResult, validate_histogram
from analyst.pr import pr_from_released_scores
from analyst.recommend import recommendation_warning
from analyst.hierarchy import calibration_summary, improper_warning
from analyst.result import TestResult, ValidationResult
from analyst.session import Progress, ValidationSession, check_privacy_request, concurrently, score_source

__all__ = ["Federation", "SiteAnswers", "release_queries"]


def release_queries(epsilon: float, delta: float) -> list[pb.ReleaseQuery]:
    """One validation's release at (``epsilon``, ``delta``) of every protocol as :meth:`Federation.validate`
    asks it by default (histograms with their score sums); a site answers for the protocols it serves."""
    return [pb.ReleaseQuery(protocol=p, epsilon=float(epsilon), delta=float(delta), score_sums=p == "histogram")
            for p in ("paper", "histogram", "boyd")]


class SiteAnswers(dict):
    """The answers of the sites that answered (site name to answer), and ``failed``: the others' errors.

    ``describe`` and ``budget`` return this, so one site that is down does not hide the others.
    """

    def __init__(self, answers: Mapping[str, Any], failed: Mapping[str, SiteError]):
        super().__init__(answers)
        self.failed: dict[str, SiteError] = dict(failed)

    @property
    def partial(self) -> bool:
        """True when some site did not answer."""
        return bool(self.failed)

    def raise_if_none(self) -> "SiteAnswers":
        """Raise the first site's error when no site answered; else return self."""
        if not self and self.failed:
            first = next(iter(self.failed.values()))
            if len(self.failed) > 1:
                first.args = (f"{first.args[0]} (also failed: {', '.join(list(self.failed)[1:])})",)
            raise first
        return self


class Federation:
    """The sites taking part in a validation.

    Parameters
    ----------
    sites : sequence of SiteConfig
        Addresses and credentials; names must be unique.
    timeout : float
        Deadline of each call in seconds (streamed releases and uploads get longer).
    retries : int
        Retries of a call that failed with UNAVAILABLE (exponential backoff); other errors are not retried.

    Examples
    --------
    >>> fed = Federation.from_file("federation.toml")                       # doctest: +SKIP
    >>> res = fed.validate("test", "y", score="pred", epsilon=5, delta=0.01)  # doctest: +SKIP
    """

    def __init__(self, sites: Sequence[SiteConfig], *, timeout: float = 30.0, retries: int = 3):
        sites = list(sites)
        if not sites:
            raise ValueError("a federation needs at least one site")
        names = [s.name for s in sites]
        if len(set(names)) != len(names):
            raise ValueError(f"site names must be unique, got {names}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (np.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
        if isinstance(retries, bool) or int(retries) != retries or retries < 0:
            raise ValueError(f"retries must be a non-negative integer, got {retries!r}")
        self.sites = sites
        self.connections = [SiteConnection(s, SiteServiceStub, timeout=timeout, retries=retries) for s in sites]
        # One pool for every fan-out of this federation's steps (a validation makes about twenty).
        # Up to five steps run at once (the fit beside the moments, Brier, calibration and budget), so five
        # workers per site, and two for the analyst's own post-processing that runs meanwhile.
        self.executor = ThreadPoolExecutor(max_workers=5 * len(sites) + 2, thread_name_prefix="dsroc-site")
        self._closing: list[Future] = []  # sessions closing in the background (see close_later)

    @classmethod
    def from_file(cls, path: str | Path) -> "Federation":
        """Build a federation from a TOML file (see ``docs/analyst.md`` for the format)."""
        sites, options = load_federation_file(path)
        return cls(sites, **options)

    # -- information ----------------------------------------------------------------------------
    def _ask_all(self, fn) -> SiteAnswers:
        replies = fan_out_partial(self.connections, fn, executor=self.executor)
        ok = {n: MessageToDict(r, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
              for n, r in zip(self.names, replies) if not isinstance(r, SiteError)}
        return SiteAnswers(ok, {n: r for n, r in zip(self.names, replies) if isinstance(r, SiteError)}).raise_if_none()

    def describe(self, *, epsilon: float | None = None, delta: float | None = None) -> SiteAnswers:
        """Each site's datasets (columns, outcome and score columns), policy and remaining budget.

        With ``epsilon`` and ``delta`` each dataset's budget also says how many more releases at them
        fit, per protocol (``left``), by the site's own accountant. Sites that fail are in ``.failed`` of
        the answer (a :class:`SiteError` each); only when no site answers is the first site's error raised.
        """
        queries = release_queries(epsilon, delta) if epsilon is not None else []
        return self._ask_all(lambda c: c.call("Describe", pb.DescribeRequest(queries=queries)))

    def budget(self, dataset: str, *, epsilon: float | None = None, delta: float | None = None) -> SiteAnswers:
        """Each site's spent and remaining privacy budget for ``dataset``; failed sites in ``.failed``.

        With ``epsilon`` and ``delta`` it also says how many more releases at them fit, per protocol
        (``left``: one release is one validation), by the site's own accountant.
        """
        queries = release_queries(epsilon, delta) if epsilon is not None else []
        return self._ask_all(lambda c: c.call("Budget", pb.BudgetRequest(dataset=dataset, queries=queries)).budget)

    @property
    def names(self) -> list[str]:
        """Site names in federation order."""
        return [s.name for s in self.sites]

    # -- analysis -------------------------------------------------------------------------------
    def session(self, dataset: str, outcome: str, *, score: str | None = None, model=None,
                progress: Progress | None = None, with_sensitivity: bool = False) -> ValidationSession:
        """Open a session at every site; its methods are the single steps of the procedure.

        ``with_sensitivity``: have the sites send their sensitivity with the session (paper protocol).
        """
        self._wait_closing()
        return ValidationSession(self.connections, dataset=dataset, outcome=outcome,
                                 source=score_source(score=score, model=model), progress=progress,
                                 executor=self.executor, with_sensitivity=with_sensitivity)

    def close_later(self, session: ValidationSession) -> None:
        """Close ``session`` in the background (off the end of a validation); the next session waits for it,
        so no site ever sees more open sessions than one at a time from this federation's validations."""
        closing = session.close(wait=False)
        if closing is not None:
            self._closing.append(closing)

    def _wait_closing(self) -> None:
        while self._closing:
            self._closing.pop().result()

    def validate(self, dataset: str, outcome: str, *, score: str | None = None, model=None,
                 epsilon: float, delta: float, protocol: str = "histogram", grid=None, alpha: float = 0.05,
                 n_bins: int | None = None, edges=None, threshold: float | None = None, a0: float | None = None,
                 sensitivity: float | None = None, ci_method: str = "logit", spacing: str = "equal",
                 scalars=(), score_sums: bool = True,
                 progress: Progress | None = None) -> ValidationResult | HistogramResult:
        """Validate a model on the union of the sites' data without any record leaving its site.

        Parameters
        ----------
        protocol : {"histogram", "paper"}, default "histogram"
            ``"histogram"``: each site answers with one (epsilon, delta)-DP release of per-class noisy
            histograms (add/remove one patient), and everything is computed from their sum
            (:class:`analyst.histogram.HistogramResult`). ``"paper"``: the paper's protocol (noisy
            scores, then exact q-protected answers; not DP end to end). Options below marked
            (paper) apply to it only; ``n_bins`` is the histogram's bin count (default
            :func:`analyst.histogram.default_n_bins`) or the paper's calibration bins (default 10).
        spacing : {"equal", "logit"}, default "equal"
            (histogram) Grid spacing.
        scalars : sequence of {"sum_sq", "sum_p", "sum_y"}
            (histogram) Also release these noisy sums for an unbinned Brier score and O/E.
        score_sums : bool, default True
            (histogram) Also release each bin's noisy sum of scores per class, within the same epsilon (the
            counts' noise grows by 5 %): calibration, O/E, Brier and the slope then use within-bin mean
            scores instead of bin midpoints, and within-bin pairs of the AUC are resolved.
        dataset, outcome : str
            Dataset name and outcome column (labels 0/1) as the sites declare them.
        score : str, optional
            A score column of the dataset. Give this or ``model``.
        model : dsroc.GlmModel or mapping, optional
            A GLM (link, intercept, coefficients over dataset columns) the sites evaluate.
        epsilon, delta : float
            Privacy level of each site's noisy release of scores.
        grid : None, int or array_like
            ROC-GLM threshold grid (default: 28 points, as in the paper).
        alpha : float
            1 - confidence level of the AUC interval.
        n_bins, edges
            Calibration bins: ``n_bins`` equal bins on [0, 1] or explicit ``edges``.
        threshold : float, optional
            Also compute the confusion matrix at this threshold.
        a0 : float, optional
            Also test ``H0: AUC <= a0`` (rejected when the whole CI lies above a0).
        sensitivity : float, optional
            Ask the sites to use this larger Delta than their rules give.
        ci_method : {"logit", "wald"}
            Confidence interval on the logit scale (default) or the AUC scale.
        progress : callable, optional
            ``progress(step, site, message)`` called as steps and sites finish.

        Returns
        -------
        ValidationResult
            Its ``warnings`` say when (epsilon, delta) is not among the settings the simulation study
            recommends for the sites' largest Delta (:func:`analyst.recommend_settings`); the
            validation still runs, since the sites alone decide what they release.
        """
        if protocol not in ("histogram", "paper"):
            raise ValueError(f"protocol must be 'histogram' or 'paper', got {protocol!r}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
        if protocol == "histogram":
            check_privacy_request(epsilon=epsilon, delta=delta)
            score_source(score=score, model=model)
            return validate_histogram(self, dataset, outcome, score=score, model=model, epsilon=epsilon, delta=delta,
                                      n_bins=n_bins, spacing=spacing,
                                      scalars=tuple(scalars), score_sums=score_sums, alpha=alpha, progress=progress)
        n_bins = 10 if n_bins is None else n_bins
        if ci_method not in ("logit", "wald"):
            raise ValueError(f"ci_method must be 'logit' or 'wald', got {ci_method!r}")
        if a0 is not None and not 0 <= a0 <= 1:
            raise ValueError(f"a0 must lie in [0, 1], got {a0}")
        check_privacy_request(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        score_source(score=score, model=model)  # a malformed model fails here, before any site is asked
        grid_values = dsroc.rocglm_grid(grid)
        dsroc.calibration_edges(n_bins, edges=edges)
        timing: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(step):
            nonlocal clock
            now = time.perf_counter()
            timing[step] = now - clock
            clock = now

        started = clock
        with self.session(dataset, outcome, score=score, model=model, progress=progress, with_sensitivity=True) as s:
            lap("open")
            sens = s.sensitivity()
            releases = s.release(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
            lap("release")
            level = 1 - alpha
            s0_noisy, s1_noisy = s.pool(releases)
            # Post-processing of the release, on the analyst's own CPU while the sites work.
            pr_done: Future = self.executor.submit(pr_from_released_scores, s0_noisy, s1_noisy, level=level)
            summary_done: Future = self.executor.submit(s.release_summary, releases, pooled=(s0_noisy, s1_noisy))
            s.upload_survivors(releases)
            lap("upload")

            def timed(step, fn):
                def run():
                    t = time.perf_counter()
                    out = fn()
                    timing[step] = time.perf_counter() - t
                    return out
                return run

            def moments_step():
                moments = s.placement_moments()
                return moments, s.noise_corrected_auc(releases, moments, summary=summary_done.result(), level=level,
                                                      method=ci_method)

            def cells_step():
                # The confusion matrix first: a site's disclosure auditor refuses a threshold that would tell
                # something with answers given before, while calibration only withholds more bins.
                confusion = None if threshold is None else s.confusion(threshold)
                return s.calibration(n_bins=n_bins, edges=edges), confusion

            # Independent steps at the same time: the fit's round trips beside the others'.
            fit, (moments, corrected), (brier, n), (calibration, confusion), budgets = concurrently(
                timed("rocglm", lambda: s.fit_rocglm(grid=grid)), timed("moments", moments_step),
                timed("brier", s.brier), timed("calibration", cells_step), timed("budget", s.budget))
            lap("analysis")
            variance, n0, n1 = moments.variance, moments.n0, moments.n1
            ci = dsroc.auc_ci(fit.auc, variance, level=level, method=ci_method)
            test = None if a0 is None else TestResult(a0, level, dsroc.auc_test(ci, a0))
            pr = pr_done.result()
            privacy = s.privacy(releases, sens, budgets=budgets)
            advice = recommendation_warning(epsilon, delta, [p.sensitivity for p in privacy.values()],
                                            tau=max(p.tau for p in privacy.values()))
            notes = tuple(w for w in (advice, improper_warning(fit.params)) if w is not None)
            hierarchy = calibration_summary(calibration, level=level)
            self.close_later(s)
            lap("finish")
            timing["total"] = time.perf_counter() - started
            return ValidationResult(
                dataset=dataset, outcome=outcome, score_source=s.score_source, sites=tuple(self.names),
                n=n, n0=n0, n1=n1, auc=fit.auc, auc_ci=ci, auc_variance=variance, level=level,
                ci_method=ci_method, rocglm=fit, brier=brier, calibration=calibration, privacy=privacy,
                grid=grid_values, epsilon=float(epsilon), delta=float(delta), confusion=confusion,
                test=test, timing=timing, warnings=notes, calibration_hierarchy=hierarchy,
                auc_corrected=corrected, pr=pr)

    def close(self) -> None:
        """Close the channels to all sites (after the sessions still closing)."""
        self._wait_closing()
        self.executor.shutdown(wait=True)
        for c in self.connections:
            c.close()

    def __enter__(self) -> "Federation":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
