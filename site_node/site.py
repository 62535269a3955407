"""The site's shared services: datasets, policy, ledger, disclosure auditor, signer and sessions.

The protocols' calls (:mod:`site_node.protocols`) use these services; the gRPC servicer translates
messages and dispatches to the protocols. Nothing here changes state before its checks passed, so a
refused request leaves everything as it was.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable

from dsroc.privacy.accounting import VALUE_DISCRETIZATION

from .config import DatasetConfig, SiteConfig
from .data.datasets import DatasetStore, feature_values, outcome_values, time_values
from .data.scores import ScoreSpec, compute_scores
from .errors import FailedPrecondition, InvalidArgument, PermissionDenied
from .protocols.budget import releases_left
from .rules.calibrations import Calibrations
from .protocols.paper.release_cache import ReleaseCache
from .rules.approvals import ModelApprovals
from .rules.disclosure import DisclosureStore
from .security.noise_key import NoiseKey
from .security.signing import ReleaseSigner
from .sessions import ScoredData, Session, SessionStore, new_session_id
from .store.ledger import BudgetStatus, Ledger, Release, ReleasePlan, Reservation

__all__ = ["DatasetSummary", "Site"]

_SCORED_CACHE = 8  # (dataset, source, outcome) score vectors kept for new sessions
_RELEASE_CACHE_BYTES = 32 * 2**20  # opened score releases kept: both classes of 2 million patients


@dataclass(frozen=True)
class DatasetSummary:
    """What Describe tells an analyst about a dataset: names and types, never counts."""

    config: DatasetConfig
    columns: list[tuple[str, str]]
    rule: str
    budget: BudgetStatus


class Site:
    """One hospital site: its datasets, policy, ledger and sessions.

    Parameters
    ----------
    config : SiteConfig
    ledger : Ledger
    datasets : DatasetStore, optional
        Where the datasets are read (default: in this process).
    """

    def __init__(self, config: SiteConfig, ledger: Ledger, *, datasets: DatasetStore | None = None):
        self.config = config
        self.policy = config.policy
        self.ledger = ledger
        # Noise is calibrated on the ledger's own privacy-loss grid, so a release at the full budget fits it.
        self.ledger_interval = getattr(ledger, "interval", VALUE_DISCRETIZATION)
        self.approvals = ModelApprovals(config.approvals_path)
        self.disclosure = DisclosureStore(config.disclosure_path)
        self.signer = ReleaseSigner(config.name, config.signing_key_path, config.peers)
        self.noise_key = NoiseKey(config.noise_key_path)
        self.releases = ReleaseCache(_RELEASE_CACHE_BYTES)  # opened score releases (paper protocol)
        # calibrations made on request (secagg shares, planned releases' events): kept, their CPU bounded per analyst
        self.calibrations = Calibrations(config.calibration_cpu_seconds_per_minute)
        self.datasets = datasets if datasets is not None else DatasetStore(config.datasets)
        self.sessions = SessionStore(idle_seconds=config.session_idle_seconds, max_sessions=config.max_sessions,
                                     max_per_analyst=config.max_sessions_per_analyst)
        self.sessions.on_end = self.end_sessions  # a session's holds end with it
        self._scored: OrderedDict[tuple[str, str, str], ScoredData] = OrderedDict()
        self._scored_lock = threading.Lock()

    # ------------------------------------------------------------------ datasets and budget
    def _allowed(self, analyst: str, dataset: str) -> DatasetConfig:
        config = self.datasets.config(dataset)  # NotFound first: an unknown name is not a permission question
        if not self.config.analysts[analyst].may_use(dataset):
            raise PermissionDenied(f"analyst {analyst!r} may not use dataset {dataset!r} at this site")
        return config

    def sensitivity_rule(self, config: DatasetConfig) -> str:
        """The sensitivity rule of a dataset: its own, else the policy's."""
        return config.sensitivity or self.policy.sensitivity

    def describe(self, analyst: str, queries=()) -> list[DatasetSummary]:
        """The datasets this analyst may use, with columns, sensitivity rule and budget (and how many
        more releases of each of ``queries`` fit it)."""
        out = []
        for name in self.datasets.names():
            if not self.config.analysts[analyst].may_use(name):
                continue
            config = self.datasets.config(name)
            try:
                columns = list(self.datasets.table(name).kinds.items())
            except InvalidArgument:
                columns = []  # unreadable (logged for the administrator); the others are still described
            out.append(DatasetSummary(config, columns, self.sensitivity_rule(config),
                                      self.budget_of(config, queries, analyst=analyst)))
        return out

    def budget_of(self, config: DatasetConfig, queries=(), *, analyst: str = "", delta: float = 0.0,
                  release_ids=()) -> BudgetStatus:
        """Spent and remaining privacy budget of a dataset's population, without a permission check, and how
        many more releases of each :class:`site_node.protocols.budget.ReleaseQuery` fit it (their calibrations
        within ``analyst``'s allowance, :mod:`site_node.rules.calibrations`); ``delta`` and ``release_ids``: its
        epsilon at ``delta`` and those releases' alone (:meth:`Ledger.budget`)."""
        left = releases_left(self, config.population, queries, analyst=analyst) if queries else ()
        status = self.ledger.budget(config.population, self.policy, delta=delta, release_ids=tuple(release_ids))
        return replace(status, dataset=config.name, left=left)

    def budget(self, analyst: str, dataset: str, queries=(), *, delta: float = 0.0, release_ids=()) -> BudgetStatus:
        """Spent and remaining privacy budget of a dataset's population (shared by entries over the same
        patients), how many more releases of each query fit it, and (``delta``, ``release_ids``) the epsilon at
        ``delta`` of its history and of those releases alone."""
        return self.budget_of(self._allowed(analyst, dataset), queries, analyst=analyst, delta=delta,
                              release_ids=release_ids)

    # ------------------------------------------------------------------ all or nothing
    def prepare(self, plan: ReleasePlan, hold_seconds: float = 0.0, *, follow_up: ReleasePlan | None = None,
                takes_over: str = "", session_id: str = "") -> Reservation:
        """Hold the budget of a checked release (PrepareRelease) in the analyst's session ``session_id`` (the hold
        ends with it): nothing is released or charged. ``follow_up``: the checked release that follows it, held
        too (``Reservation.follow_up_id``); ``takes_over``: such a hold made for this release
        (:meth:`site_node.store.ledger_api.Ledger.reserve`)."""
        return self.ledger.reserve(plan.key, dataset=plan.dataset, analyst=plan.analyst, events=plan.events,
                                   epsilon=plan.epsilon, delta=plan.delta, fingerprint=plan.fingerprint,
                                   policy=self.policy, hold_seconds=hold_seconds,
                                   follow_up=() if follow_up is None else follow_up.events, takes_over=takes_over,
                                   session_id=session_id)

    def end_sessions(self, sessions) -> None:
        """Return the holds made in ``sessions`` (closed, or expired after inactivity) to the budget; the last one
        lets the opened score releases go."""
        by_analyst: dict[str, list[str]] = {}
        for session in sessions:
            by_analyst.setdefault(session.analyst, []).append(session.session_id)
        for analyst, ids in by_analyst.items():
            self.ledger.end_sessions(analyst, ids)
        if not len(self.sessions):
            # No session left to ask a release's other class or a repeat: its opened scores (both classes, 16 MB at
            # 10^6 patients) need not stay resident until the next validation; a later repeat opens them again.
            self.releases.clear()

    def cancel(self, analyst: str, reservation_id: str) -> bool:
        """Return the analyst's hold to the budget (False when unknown, used or expired)."""
        return self.ledger.cancel(reservation_id, analyst)

    def charge(self, plan: ReleasePlan, reservation: str = "") -> tuple[Release, bool]:
        """Charge and record a checked release (or replay it), using the hold ``reservation`` when given."""
        return self.ledger.release(plan.key, dataset=plan.dataset, analyst=plan.analyst, events=plan.events,
                                   epsilon=plan.epsilon, delta=plan.delta, rule=plan.rule,
                                   fingerprint=plan.fingerprint, policy=self.policy, make=plan.make,
                                   store=plan.store, reservation=reservation)

    # ------------------------------------------------------------------ sessions
    def open_session(self, analyst: str, dataset: str, outcome: str, spec: ScoreSpec, *, time: str = "",
                     before: Callable[[Session], Callable[[], object] | None] | None = None) -> Session:
        """Open a session after checking permission, columns and data (problems are named per column).

        ``time``: a declared time column (a survival session; the outcome is then the event indicator).
        ``before(session)``: run on the session-to-be (its id drawn, not stored yet) before it opens, e.g. a release's
        hold; it returns what undoes it when the session then cannot open (or None).
        """
        config = self._allowed(analyst, dataset)
        if outcome not in config.outcomes:
            raise InvalidArgument(
                f"dataset {dataset!r} has no declared outcome column {outcome!r} (declared: {list(config.outcomes)})"
            )
        if time and time not in config.time_columns:
            raise InvalidArgument(f"time: dataset {dataset!r} has no declared time column {time!r} (declared: "
                                  f"{list(config.time_columns)})")
        data = self._scored_data(dataset, outcome, spec, config, time)

        def make(session_id: str) -> Session:
            # Recorded only once the session cap has passed, so a refused session records no model.
            # Every model is a new question about the same patients (per dataset, whatever the outcome).
            if spec.model is not None:
                self.ledger.record_model(config.population, spec.key, self.policy.max_models)
            return Session(session_id, analyst, data)

        session_id = new_session_id()  # known before it opens: a hold made by ``before`` belongs to it
        undo = before(Session(session_id, analyst, data)) if before is not None else None
        try:
            return self.sessions.add(analyst, make, session_id=session_id)
        except BaseException:
            if undo is not None:
                undo()
            raise

    def _scored_data(self, dataset: str, outcome: str, spec: ScoreSpec, config: DatasetConfig,
                     time: str = "") -> ScoredData:
        """The shared true scores for (dataset, source, outcome[, time column]); the last few are kept for new
        sessions."""
        key = (dataset, spec.key, outcome, time)
        with self._scored_lock:
            data = self._scored.get(key)
            if data is not None:
                self._scored.move_to_end(key)
                return data
        table = self.datasets.table(dataset)
        labels = outcome_values(table, dataset, outcome)
        times = time_values(table, dataset, time) if time else None
        scores, score_range = compute_scores(spec, config, table)
        features = None
        if spec.model is not None:
            features = feature_values(table, dataset, spec.model.features)
        data = ScoredData(dataset, outcome, spec, scores, labels, score_range, features, population=config.population,
                          time_column=time, times=times)
        with self._scored_lock:
            data = self._scored.setdefault(key, data)
            while len(self._scored) > _SCORED_CACHE:
                self._scored.popitem(last=False)  # sessions still using it keep it alive
        return data

    def warm_up(self) -> int:
        """Read every dataset and prepare what a validation of each (score column, outcome) needs first: the
        scores split by class, sorted, and their fingerprint (at most as many as the site keeps), and import
        the statistics modules a validation uses and draw one histogram release of made-up scores
        (:meth:`_warm_up_histogram`), so that the first validation after start-up costs what the next ones do.
        Datasets that cannot be read are skipped (the store logs why; a request names them).

        Returns
        -------
        int
            The (dataset, score column, outcome) combinations prepared.
        """
        import dsroc
        from dsroc.privacy.lattice import lattice_gaussian

        for name in ("SurvivorFunction", "RocGlmParts", "calibration_parts"):  # their modules import scipy
            getattr(dsroc, name)
        noise = lattice_gaussian(1.0, 1e-5, 1.0)  # the noise calibration of a release (scipy.special, scipy.optimize)
        noise.noisy_points([0.0] * 64)  # the sampler's tables that depend on no parameter, the cipher
        self._warm_up_histogram()
        self.datasets.prefetch(self.datasets.names())  # all in one helper process where the site has one
        readable = []
        for name in self.datasets.names():
            try:
                self.datasets.table(name)
            except InvalidArgument:
                continue
            readable.append(name)
        prepared = 0
        for name in readable:
            config = self.datasets.config(name)
            for column in config.scores:
                for outcome in config.outcomes:
                    if prepared >= _SCORED_CACHE:
                        return prepared
                    try:
                        data = self._scored_data(name, outcome, ScoreSpec(column=column), config)
                    except InvalidArgument:  # a column that fails its checks: a request names it
                        continue
                    data.fingerprint  # sorts both classes once  # noqa: B018
                    prepared += 1
        return prepared

    def _warm_up_histogram(self) -> None:
        """Plan and draw one histogram release of 64 made-up scores, then drop it (nothing is charged or kept): the
        grid, the binning and OpenDP's exact sampler (its library and first call) are then loaded before the first
        request. Skipped where the policy allows no histogram release it could plan."""
        import numpy as np

        from .errors import SiteError
        from .protocols.histogram.release import decode_histogram, draw_histogram, plan_histogram

        policy = self.policy
        if "histogram" not in policy.protocols:
            return
        try:
            plan = plan_histogram(policy, (0.0, 1.0), epsilon=policy.max_epsilon, delta=policy.max_delta,
                                  n_bins=policy.histogram_bins[0], spacing=policy.histogram_spacings[0],
                                  scalars=(), interval=self.ledger_interval, score_sums=True)
        except SiteError:
            return
        scores = np.linspace(0.0, 1.0, 64)
        decode_histogram(plan, draw_histogram(plan, scores, np.arange(64) % 2, np.random.default_rng()))

    def session(self, analyst: str, session_id: str, *, survival: bool = False) -> Session:
        """The analyst's open session, of the kind the call serves (:meth:`require_kind`)."""
        session = self.sessions.get(analyst, session_id)
        self.require_kind(session, survival=survival)
        return session

    @staticmethod
    def require_kind(session: Session, *, survival: bool) -> None:
        """Refuse (FailedPrecondition) a session of the other kind than the call serves: a survival session (opened
        with a time column) for ``survival``, else a binary one. A survival session's outcome is an event indicator,
        which no binary call may read as a label (it would ignore the censoring)."""
        if session.data.survival and not survival:
            raise FailedPrecondition(f"this session was opened with the time column {session.data.time_column!r} (a "
                                     "survival session): only ReleaseSurvival serves it; open a session without a "
                                     "time column for this call")
        if survival and not session.data.survival:
            raise FailedPrecondition("this session has no time column: ReleaseSurvival needs a session opened with "
                                     "one (OpenSessionRequest.time)")

    def close_session(self, analyst: str, session_id: str) -> None:
        """Close a session."""
        self.sessions.close(analyst, session_id)

    def close(self) -> None:
        """Close the site's own stores (the ledger is closed by its owner)."""
        self.approvals.close()
        self.disclosure.close()

    # ------------------------------------------------------------------ disclosure auditor
    def check_disclosure(self, data: ScoredData, queries, what: str) -> None:
        """Record the counts ``queries`` with the disclosure auditor, or refuse (PermissionDenied)."""
        config = self.datasets.config(data.dataset)

        def population_data(outcomes, sources):
            labels = {o: self._evaluate(data, o, data.spec.key, config).labels for o in outcomes}
            scores = {s: self._evaluate(data, data.outcome, s, config).scores for s in sources}
            return labels, scores

        self.disclosure.check_and_record(data.key[0], list(queries), q=self.policy.privacy_level,
                                         data=population_data, what=what)

    def _evaluate(self, data: ScoredData, outcome: str, source: str, config: DatasetConfig) -> ScoredData:
        """The true scores and labels of another (outcome, score source) on the session's dataset (same rows)."""
        if outcome == data.outcome and source == data.spec.key:
            return data
        try:
            return self._scored_data(data.dataset, outcome, ScoreSpec.from_key(source), config)
        except InvalidArgument:
            # Answers about it were given, so without it the auditor cannot check: refuse.
            raise FailedPrecondition(
                f"the score source {source} or outcome {outcome!r} answered before on dataset {data.dataset!r} can no "
                "longer be evaluated (removed from the config?); the site administrator must restore it"
            ) from None
