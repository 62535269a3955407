"""The analyst's entry point: a set of sites, their descriptions and budgets, and ``validate``."""

from __future__ import annotations

from time import perf_counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from google.protobuf.json_format import MessageToDict

from dsroc.secagg.calibrations import CalibrationCache
from dsroc.v1 import site_pb2 as pb
from dsroc.v1.site_pb2_grpc import SiteServiceStub

from analyst.config import SiteConfig, load_federation_file
from analyst.connection import SiteConnection, SiteError, SiteTransport, fan_out_partial
from analyst.protocols import ProtocolOptions, ValidationRequest, get_protocol
from analyst.protocols.histogram.secagg_survival import survival_strategy
from analyst.protocols.histogram.survival import SurvivalOptions
from analyst.protocols.paper import PaperSession
from analyst.result import ValidationResult
from analyst.session import Progress, ValidationInterrupted, ValidationSession, check_privacy_request, score_source

__all__ = ["MAX_THREADS", "Federation", "SiteAnswers", "release_queries", "site_queries"]

#: Threads of a federation's pool at most (calls to sites beyond them wait for a free one).
MAX_THREADS = 32


def release_queries(epsilon: float, delta: float, *, survival: bool = False) -> list[pb.ReleaseQuery]:
    """One validation's release at (``epsilon``, ``delta``) of every protocol as :meth:`Federation.validate`
    asks it by default (histograms with their score sums, survival releases without their risk sums), the survival
    release only with ``survival``; a site answers for the protocols it serves."""
    protocols = ("paper", "histogram", "boyd", "survival") if survival else ("paper", "histogram", "boyd")
    return [pb.ReleaseQuery(protocol=p, epsilon=float(epsilon), delta=float(delta), score_sums=p == "histogram")
            for p in protocols]


def site_queries(conn: SiteTransport, epsilon: float | None, delta: float | None) -> list[pb.ReleaseQuery]:
    """:func:`release_queries` for one site: with its survival release when its policy allows survival (lists
    ``survival_time_edges``); none without ``epsilon``."""
    if epsilon is None:
        return []
    policy = conn.call("Describe", pb.DescribeRequest()).policy
    return release_queries(epsilon, delta, survival=bool(policy.survival_time_edges))


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
    connect : callable, optional
        ``connect(site_config)``: the :class:`~analyst.connection.SiteTransport` to each site; by default a gRPC
        :class:`~analyst.connection.SiteConnection` to its daemon (``timeout`` and ``retries`` apply to it). The
        Flower transport (:func:`analyst.flower.flower_federation`) passes its own.
    calibration_cache : path, optional
        A file where the secagg protocol's calibrations (its budget split and share sigmas) are kept across
        processes (:mod:`dsroc.secagg.calibrations`): a validation asking what one asked before skips them. Every
        site checks the share it is proposed whatever its source. Default: kept for this federation's life only.

    Examples
    --------
    >>> fed = Federation.from_file("federation.toml")                       # doctest: +SKIP
    >>> res = fed.validate("test", "y", score="pred", epsilon=5, delta=0.01)  # doctest: +SKIP
    """

    def __init__(self, sites: Sequence[SiteConfig], *, timeout: float = 30.0, retries: int = 3,
                 connect: Callable[[SiteConfig], SiteTransport] | None = None,
                 calibration_cache: str | Path | None = None):
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
        self._calibrations = None
        if calibration_cache is not None:
            from site_node.store.calibrations import CalibrationFile  # the site's kind of file (the store's import)

            self._calibrations = CalibrationFile(calibration_cache)
        self._memory_calibrations = CalibrationCache() if calibration_cache is None else None
        if connect is None:
            def connect(s: SiteConfig) -> SiteTransport:
                return SiteConnection(s, SiteServiceStub, timeout=timeout, retries=retries)
        self.connections: list[SiteTransport] = [connect(s) for s in sites]
        # One pool for every fan-out of this federation's steps (a validation makes about twenty).
        # Up to five steps run at once (the fit beside the moments, Brier, calibration and budget), so five
        # workers per site, and two for the analyst's own post-processing that runs meanwhile -- but never
        # more than MAX_THREADS: each call holds a thread only while it waits, and beyond that many a
        # federation of 50 sites gains nothing but memory and switching.
        self.executor = ThreadPoolExecutor(max_workers=min(5 * len(sites) + 2, MAX_THREADS), thread_name_prefix="dsroc-site")
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
        fit, per protocol (``left``; survival releases where the site's policy allows them), by the site's own
        accountant. Sites that fail are in ``.failed`` of
        the answer (a :class:`SiteError` each); only when no site answers is the first site's error raised.
        """
        return self._ask_all(lambda c: c.call("Describe", pb.DescribeRequest(queries=site_queries(c, epsilon, delta))))

    def budget(self, dataset: str, *, epsilon: float | None = None, delta: float | None = None) -> SiteAnswers:
        """Each site's spent and remaining privacy budget for ``dataset``; failed sites in ``.failed``.

        With ``epsilon`` and ``delta`` it also says how many more releases at them fit, per protocol
        (``left``: one release is one validation; survival releases where the site's policy allows them), by the
        site's own accountant; with ``delta`` the history's epsilon at it too (``epsilon_at_delta``, by the bound of
        ``epsilon_spent``: the two never disagree on which delta is the larger).
        """
        return self._ask_all(lambda c: c.call("Budget", pb.BudgetRequest(
            dataset=dataset, queries=site_queries(c, epsilon, delta), delta=float(delta or 0.0))).budget)

    @property
    def names(self) -> list[str]:
        """Site names in federation order."""
        return [s.name for s in self.sites]

    # -- analysis -------------------------------------------------------------------------------
    def session(self, dataset: str, outcome: str, *, score: str | None = None, model=None,
                progress: Progress | None = None, with_sensitivity: bool = False,
                hold: pb.PrepareRequest | None = None, time: str | None = None) -> ValidationSession:
        """Open a session at every site; its methods are the single steps of the procedure (the paper protocol's).

        ``with_sensitivity``: have the sites send their sensitivity with the session (paper protocol).
        ``hold``: have the sites also hold this release (a noisy-score release's ``PrepareRequest``) with the
        session, used by :meth:`PaperSession.release` of the same parameters. ``time``: a survival session on this
        time column (``outcome`` the event indicator), a plain :class:`ValidationSession`; else a
        :class:`PaperSession`.
        """
        return self._open(PaperSession if time is None else ValidationSession, dataset, outcome, score=score,
                          model=model, progress=progress, with_sensitivity=with_sensitivity, hold=hold, time=time)

    def _open(self, session_type: type[ValidationSession], dataset: str, outcome: str, *, score, model, progress,
              with_sensitivity: bool, hold: pb.PrepareRequest | None, time: str | None):
        self._wait_closing()
        session = session_type(self.connections, dataset=dataset, outcome=outcome,
                               source=score_source(score=score, model=model), progress=progress,
                               executor=self.executor, with_sensitivity=with_sensitivity, hold=hold, time=time)
        session.calibrations = self._memory_calibrations if self._calibrations is None else self._calibrations.cache
        return session

    def close_later(self, session: ValidationSession) -> None:
        """Close ``session`` in the background (off the end of a validation); the next session waits for it,
        so no site ever sees more open sessions than one at a time from this federation's validations."""
        closing = session.close(wait=False)
        if closing is not None:
            self._closing.append(closing)

    def _wait_closing(self) -> None:
        while self._closing:
            self._closing.pop().result()

    def validate(self, dataset: str, outcome: str, *, score: str | None = None, model=None, epsilon: float,
                 delta: float, protocol: str = "histogram", options: ProtocolOptions | None = None,
                 alpha: float = 0.05, progress: Progress | None = None, time: str | None = None,
                 horizon: float | None = None, **protocol_options) -> ValidationResult:
        """Validate a model on the union of the sites' data without any record leaving its site.

        Parameters
        ----------
        dataset, outcome : str
            Dataset name and outcome column (labels 0/1) as the sites declare them; with ``time``, the event
            column (1 event, 0 censored).
        score : str, optional
            A score column of the dataset. Give this or ``model``.
        model : dsroc.GlmModel or mapping, optional
            A GLM (link, intercept, coefficients over dataset columns) the sites evaluate.
        epsilon, delta : float
            Privacy request of each site's release.
        protocol : {"histogram", "secagg", "paper"}, default "histogram"
            ``"histogram"``: each site answers with epsilon-DP releases of per-class noisy histograms
            (add/remove one patient; discrete Laplace, pure epsilon-DP per site) and everything is computed from
            their sum. ``"secagg"``: the
            same counts summed by secure aggregation, so the analyst sees only the sum (per-site results
            are unavailable by design) and the sum carries one release's noise. ``"paper"``: the
            paper's protocol (noisy scores, then exact q-protected answers; not DP end to end). See
            :mod:`analyst.protocols`.
        options : HistogramOptions, SecAggOptions or PaperOptions, optional
            The protocol's own options (:class:`analyst.HistogramOptions`, :class:`analyst.SecAggOptions`,
            :class:`analyst.PaperOptions`);
            they may also be given as keyword arguments (``n_bins=20``, ``ci_method="wald"``, ...).
        alpha : float
            1 - confidence level of every interval.
        progress : callable, optional
            ``progress(step, site, message)`` called as steps and sites finish.
        time : str, optional
            A survival validation: the sites' declared follow-up time column. The scores are then predicted risks
            of an event by ``horizon``, and every patient counts, censored or not: one (time bin x status x score
            bin) release per site (histogram protocol) gives AUC(t), Harrell's and Uno's C, Brier(t), the
            integrated and scaled Brier, calibration at the horizon and per-site pooling
            (:class:`analyst.protocols.histogram.survival.SurvivalOptions` for its options, e.g. ``time_edges``,
            ``n_bins``). Competing risks are not handled.
        horizon : float, optional
            With ``time``: the horizon of the predicted risks (e.g. 730 days); also ``SurvivalOptions.horizon``.

        Returns
        -------
        ValidationResult
            The same type for every protocol; ``detail`` holds what only this protocol has; its ``privacy``
            and ``guarantee_epsilon`` what the sites' ledgers compose this validation's releases to. Its
            ``warnings`` say, e.g., when (epsilon, delta) is not among the settings the simulation study
            recommends for the sites' largest Delta. The paper protocol refuses, before any release, a
            setting whose noise the study shows to bias its AUC beyond its interval (``outside_study=True``
            runs it anyway; :func:`analyst.recommend.paper_setting_refusal`).
        """
        strategy = get_protocol(protocol)
        if time is not None:
            strategy, protocol_options = survival_strategy(protocol, time, horizon, options, protocol_options)
        elif horizon is not None or isinstance(options, SurvivalOptions):
            raise ValueError("horizon and SurvivalOptions apply to a survival validation: give the time column too "
                             "(time=...)")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
        check_privacy_request(epsilon=epsilon, delta=delta)
        score_source(score=score, model=model)  # a malformed model fails here, before any site is asked
        opts = strategy.options(options, protocol_options)
        request = ValidationRequest(dataset, outcome, score, model, float(epsilon), float(delta), 1 - alpha, progress,
                                    time)
        strategy.check(request, opts)
        started = perf_counter()
        timing: dict[str, float] = {}
        with self._open(strategy.session_type, dataset, outcome, score=score, model=model, progress=progress,
                        with_sensitivity=strategy.with_sensitivity, hold=strategy.hold_request(request, opts),
                        time=time) as s:
            timing["open"] = perf_counter() - started
            try:
                result = strategy.run(s, request, opts, executor=self.executor, timing=timing)
                self.close_later(s)
            except KeyboardInterrupt:
                raise ValidationInterrupted(s) from None
            finally:
                if self._calibrations is not None:
                    self._calibrations.save()
        timing["total"] = perf_counter() - started
        return result

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
