"""One session per site for a validation: open, all-or-nothing hold and commit of a release, budget and close."""

from __future__ import annotations

import numbers
import threading
from concurrent.futures import Executor, Future
from typing import Callable, Mapping, Sequence

import grpc
import numpy as np

import dsroc
from dsroc.privacy.guard import PRIVACY_LEVEL_RULE
from dsroc.privacy.request import check_privacy_request as privacy_request
from dsroc.v1 import site_pb2 as pb

from analyst.connection import SiteError, SiteTransport, fan_out, fan_out_partial

__all__ = ["Progress", "ValidationInterrupted", "ValidationSession", "check_privacy_request", "concurrently",
           "raise_first_failure", "score_source"]

#: ``progress(step, site, message)``: ``site`` is None for a message about the whole step.
Progress = Callable[[str, "str | None", str], None]


def _quiet(step: str, site: str | None, message: str) -> None:
    return None


def concurrently(*steps: Callable[[], object]) -> list:
    """Run independent steps at the same time (the first in this thread, the others in new threads) and
    return their results in order; the first failure (in order) is raised after all have finished."""
    results: list = [None] * len(steps)
    errors: list = [None] * len(steps)

    def run(i):
        try:
            results[i] = steps[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(1, len(steps))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results


def score_source(*, score: str | None = None, model=None) -> pb.ScoreSource:
    """The wire form of a score source: a score column name, or a GLM (``dsroc.GlmModel`` or mapping).

    Exactly one of ``score`` and ``model`` must be given.
    """
    if (score is None) == (model is None):
        raise ValueError("give exactly one of 'score' (a score column) and 'model' (GLM coefficients)")
    if score is not None:
        if not isinstance(score, str) or not score:
            raise ValueError(f"'score' must be a non-empty column name, got {score!r}")
        return pb.ScoreSource(score_column=score)
    if isinstance(model, Mapping):
        unknown = set(model) - {"link", "intercept", "coefficients"}
        if unknown:
            raise ValueError(f"'model' has unknown key(s) {sorted(unknown)}; expected link, intercept, coefficients")
        model = dsroc.GlmModel(link=model.get("link", "logit"), intercept=model.get("intercept", 0.0),
                               coefficients=dict(model.get("coefficients", {})))
    if not isinstance(model, dsroc.GlmModel):
        raise ValueError(f"'model' must be a dsroc.GlmModel or a mapping, got {type(model).__name__}")
    link = {"logit": pb.LINK_LOGIT, "probit": pb.LINK_PROBIT}[model.link]
    return pb.ScoreSource(model=pb.GlmModel(
        link=link, intercept=float(model.intercept),
        coefficients=[pb.Coefficient(name=k, value=float(v)) for k, v in model.coefficients.items()]))


def check_privacy_request(*, epsilon: float, delta: float, sensitivity: float | None = None) -> None:
    """Reject a malformed (epsilon, delta, sensitivity) before any site is asked: (epsilon, delta) by the rule the
    sites apply too (:func:`dsroc.privacy.request.check_privacy_request`, delta above 0), the sensitivity here."""
    privacy_request(epsilon, delta, zero_delta=False)
    if sensitivity is not None and (isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real)
                                    or not (np.isfinite(sensitivity) and sensitivity > 0)):
        raise ValueError(f"sensitivity must be a positive finite number, got {sensitivity!r}")


def _asked(prepare: pb.PrepareRequest) -> tuple[float, float]:
    """The (epsilon, delta) a hold asks for its release."""
    release = getattr(prepare, prepare.WhichOneof("release"))
    return release.epsilon, release.delta


def raise_first_failure(failed: Sequence[SiteError], what: str):
    """Raise the first site's error with ``what`` (what happened at the others) added to its message."""
    first = failed[0]
    also = f" (also failed: {', '.join(e.site for e in failed[1:])})" if len(failed) > 1 else ""
    first.message += also + what
    first.args = (f"site '{first.site}': {first.code.name}: {first.message}",)
    raise first


class ValidationInterrupted(KeyboardInterrupt):
    """A validation interrupted (Ctrl-C): its message is what the sites reported charging in its session so far,
    read when shown (after the calls in flight have ended, once the federation is closed)."""

    def __init__(self, session: "ValidationSession"):
        super().__init__()
        self.session = session

    def __str__(self) -> str:
        return self.session.charges_text()


class ValidationSession:
    """One open session per site on (dataset, outcome, score source): open, hold and commit, budget, close.

    ``time``: a declared time column, for a survival release (``outcome`` is then the event indicator).

    A protocol's steps run over it (the paper protocol's are methods of its subclass,
    :class:`analyst.protocols.paper.steps.PaperSession`); use it as a context manager so the sessions close.

    ``leave_out_small`` (set by a protocol before its first release): at the first hold, before any site is charged,
    the sites that refuse because they hold too few patients (PERMISSION_DENIED by the privacy-level rule) leave the
    session and the others go on; ``left_out`` maps each such site to its refusal.
    """

    def __init__(self, connections: Sequence[SiteTransport], *, dataset: str, outcome: str,
                 source: pb.ScoreSource, progress: Progress | None = None, executor: Executor | None = None,
                 with_sensitivity: bool = False, hold: pb.PrepareRequest | None = None, time: str | None = None):
        self.connections = list(connections)
        self.executor = executor
        # The federation's secagg calibrations (dsroc.secagg.calibrations.CalibrationCache; None: none kept).
        self.calibrations = None
        self.dataset, self.outcome = dataset, outcome
        self.progress = progress or _quiet
        self.session_ids: dict[str, str] = {}
        self.policies: dict[str, pb.Policy] = {}
        self._sensitivities: dict[str, pb.SensitivityResponse] = {}
        self.leave_out_small, self.left_out = False, {}
        # What the sites reported: site -> (epsilon, delta) asked of each release it made and charged in this
        # session (free replays not counted), and the sites whose release call was in flight when it was left.
        self.charged: dict[str, list[tuple[float, float]]] = {}
        self._in_flight: set[str] = set()
        self._replayable = True  # every charged release replays at no charge
        self._asked: dict[str, tuple[float, float, bool]] = {}  # site -> (epsilon, delta, replay) of its hold
        self._open_holds: dict[str, str] = {}  # holds made and not used yet: cancelled when the session is left
        self.release_ids: dict[str, list[str]] = {}  # site -> every release made or replayed there in this session
        self._lock = threading.Lock()

        # The release the sessions hold with their opening (``hold``): site -> reservation id ("" for a free replay).
        self._held: dict[str, str] = {}
        self._hold = hold

        def open_one(conn):
            # One round trip: the reply carries the policy (and, when asked, the sensitivity and the hold) too.
            r = conn.call("OpenSession", pb.OpenSessionRequest(dataset=dataset, outcome=outcome, score=source,
                                                               with_sensitivity=with_sensitivity, prepare=hold,
                                                               time=time or ""))
            self.session_ids[conn.name] = r.session_id
            if r.HasField("prepared"):
                self._held[conn.name] = r.prepared.reservation_id
            self.policies[conn.name] = (r.policy if r.HasField("policy")  # a site from before: ask separately
                                        else conn.call("Describe", pb.DescribeRequest()).policy)
            # Steps run at the same time; never more calls at once than the site serves one analyst.
            conn.limit_calls(self.policies[conn.name].max_calls_in_progress)
            if r.HasField("sensitivity"):
                self._sensitivities[conn.name] = r.sensitivity
            return r.score_source

        try:
            described = self._each("open session", open_one)
        except Exception as exc:
            self.close()  # the sites that did open a session should not keep it (nor their holds)
            if hold is not None and isinstance(exc, SiteError):
                what = "; nothing was released or charged at any site (the others' holds were cancelled)"
                exc.message += what
                exc.args = (exc.args[0] + what,)
            raise
        self.score_source = described[0] or source.score_column or "GLM model"

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def sites(self) -> list[str]:
        """Site names in federation order."""
        return [c.name for c in self.connections]

    def _each(self, step: str, fn, *, quiet: bool = False) -> list:
        if not quiet:
            self.progress(step, None, f"asking {len(self.connections)} sites")
        done = None if quiet else (lambda site: self.progress(step, site, "done"))
        return fan_out(self.connections, fn, on_done=done, executor=self.executor)

    def _sid(self, conn) -> str:
        return self.session_ids[conn.name]

    # -- all or nothing -------------------------------------------------------------------------
    def hold(self, step: str, prepare: Callable[[SiteTransport], pb.PrepareRequest], *,
             follow_ups: dict | None = None) -> dict[str, str]:
        """Every site checks a release and holds its budget before any site releases (PrepareRelease).

        ``prepare(conn)`` is the site's request. When any site refuses or cannot be reached, every hold
        is cancelled (a hold not cancelled expires within a minute; so are the follow-up holds made, and those
        the requests were to take over) and that site's error is raised: no site was charged. Returns each site's
        reservation id: "" when the release was made before (its replay is free) or the site predates
        PrepareRelease (it checks and charges at the release). ``follow_ups``: filled with each site's hold of the
        release that follows (``PrepareRequest.follow_up``).
        """
        requests = {c.name: prepare(c) for c in self.connections}

        def one(conn):
            try:
                return conn.call("PrepareRelease", requests[conn.name])
            except SiteError as exc:
                if exc.code == grpc.StatusCode.UNIMPLEMENTED:
                    return pb.PrepareResponse()
                raise

        replies = fan_out_partial(self.connections, one, executor=self.executor)
        holds = {c.name: r.reservation_id for c, r in zip(self.connections, replies) if not isinstance(r, SiteError)}
        made = {c.name: r.follow_up_reservation_id for c, r in zip(self.connections, replies)
                if not isinstance(r, SiteError) and r.follow_up_reservation_id}
        failed = [r for r in replies if isinstance(r, SiteError)]
        if failed and self._may_leave_out(failed):
            self._leave_out(failed)
            failed = []
        if failed:
            taken = {name: q.follow_up_reservation_id for name, q in requests.items() if q.follow_up_reservation_id}
            for held in (holds, made, taken):
                self.cancel(held)
            if self.charges_so_far() is None:
                raise_first_failure(failed, "; nothing was released or charged at any site (the others' holds were "
                                            "cancelled)")
            raise_first_failure(failed, f"; no site made this release (the others' holds were cancelled); "
                                        f"{self.charges_text()}")
        self._asked = {c.name: (*_asked(requests[c.name]), r.repeated) for c, r in zip(self.connections, replies)}
        self._open_holds = {name: held for name, held in holds.items() if held}
        if follow_ups is not None:
            follow_ups.update(made)
        self.progress(step, None, f"{len(holds)} sites checked the request and hold its budget")
        return holds

    def _may_leave_out(self, failed: Sequence[SiteError]) -> bool:
        """Whether the refusing sites may leave: asked for, nothing released yet, every refusal the privacy-level rule
        (the site's size, not the request: another request would be refused the same), and some site left."""
        small = all(e.code == grpc.StatusCode.PERMISSION_DENIED and e.message.startswith(PRIVACY_LEVEL_RULE)
                    for e in failed)
        return self.leave_out_small and not self.charged and small and len(failed) < len(self.connections)

    def _leave_out(self, failed: Sequence[SiteError]) -> None:
        """Close the refusing sites' sessions (nothing was held or charged there) and go on without them."""
        gone = {e.site: e.message for e in failed}
        leaving = [c for c in self.connections if c.name in gone]
        self.cancel({name: held for name, held in self._held.items() if name in gone})
        fan_out_partial(leaving, lambda c: c.call("CloseSession", pb.CloseSessionRequest(
            session_id=self.session_ids[c.name]), timeout=5.0), executor=self.executor)
        self.connections = [c for c in self.connections if c.name not in gone]
        for name, why in gone.items():
            for held in (self.session_ids, self.policies, self._held):
                held.pop(name, None)
            self.left_out[name] = why
            self.progress("leave out", name, why)

    def cancel(self, holds: Mapping[str, str]) -> None:
        """Return held budgets at once (best effort: a hold not cancelled expires by itself)."""
        live = [c for c in self.connections if holds.get(c.name)]
        fan_out_partial(live, lambda c: c.call("CancelReservation", pb.CancelReservationRequest(
            reservation_id=holds[c.name]), timeout=5.0), executor=self.executor)

    def commit(self, step: str, holds: Mapping[str, str], release: Callable[[SiteTransport, str], object]) -> list:
        """Make every site's held release: ``release(conn, reservation_id)``, results in site order.

        A site that fails now (down since it held) is named with the sites that did release: their
        charges stand with their releases delivered, and the same request replays them at no charge.
        """
        asked, self._asked = self._asked, {}

        def one(conn):
            with self._lock:
                self._in_flight.add(conn.name)
            try:
                out = release(conn, holds.get(conn.name, ""))
            except SiteError as exc:  # the site did not release: its hold returns, nothing is charged
                with self._lock:  # unless the answer timed out: the site may have released and charged it
                    if exc.code != grpc.StatusCode.DEADLINE_EXCEEDED:
                        self._in_flight.discard(conn.name)
                    self._open_holds.pop(conn.name, None)
                raise
            with self._lock:  # an answer that fails to parse afterwards stays in flight: it may have been charged
                self._in_flight.discard(conn.name)
                self._open_holds.pop(conn.name, None)
            epsilon, delta, replay = asked.get(conn.name, (float("nan"), float("nan"), False))
            if not replay:
                self.record_charges([conn.name], epsilon, delta)
            return out

        replies = fan_out_partial(self.connections, one, on_done=lambda site: self.progress(step, site, "done"),
                                  executor=self.executor)
        failed = [r for r in replies if isinstance(r, SiteError)]
        if failed:
            self.cancel({r.site: holds.get(r.site, "") for r in failed})
            done = [c.name for c, r in zip(self.connections, replies) if not isinstance(r, SiteError)]
            raise_first_failure(failed, (f"; {', '.join(done)} released and charged their part (delivered here)"
                                         if done else "; no site made this release") + f"; {self.charges_text()}"
                                + "; the failed sites' holds return to their budgets")
        return replies

    def record_charges(self, sites, epsilon: float, delta: float, *, replayable: bool = True) -> None:
        """Note that ``sites`` reported making and charging a release at (``epsilon``, ``delta``) in this session;
        ``replayable``: the same request gets that release again at no charge (not a secure-aggregation round)."""
        with self._lock:
            for site in sites:
                self.charged.setdefault(site, []).append((float(epsilon), float(delta)))
            self._replayable = self._replayable and replayable

    def note_release(self, site: str, *release_ids: str) -> None:
        """Note releases ``site`` made (or replayed) for this session: :meth:`budget` asks its ledger to compose them."""
        with self._lock:
            ids = self.release_ids.setdefault(site, [])
            ids.extend(r for r in dict.fromkeys(release_ids) if r and r not in ids)

    def charges_so_far(self) -> str | None:
        """What the sites reported charging in this session, per site (None when none charged anything), with the
        sites whose release was in flight when the session was left (they may have charged it)."""
        with self._lock:
            order = {name: k for k, name in enumerate(self.sites)}  # federation order, as the other messages
            charged = {site: list(self.charged[site]) for site in sorted(self.charged, key=lambda s: order.get(s, 1e9))
                       if self.charged[site]}
            unsure = sorted(self._in_flight)
        if not charged and not unsure:
            return None
        parts = [f"{site} {len(c)} release{'s' if len(c) > 1 else ''} at epsilon "
                 + " + ".join(f"{e:.4g}" for e, _ in c) for site, c in charged.items()]
        text = "charged so far: " + (", ".join(parts) if parts else "no site")
        if charged and self._replayable:
            text += " (the same request replays them at no charge)"
        if unsure:
            text += f"; {', '.join(unsure)} may have charged the release in flight"
        return text

    def charges_text(self) -> str:
        """:meth:`charges_so_far`, or that nothing was charged at any site."""
        return self.charges_so_far() or "nothing was charged at any site"

    def budget(self, delta: float | None = None) -> dict[str, pb.BudgetStatus]:
        """Each site's spent and remaining budget for this dataset; with ``delta``, the site's epsilon at it too, of
        its whole history and of this session's releases alone (:meth:`note_release`), by its ledger's accountant
        (``BudgetStatus.epsilon_at_delta``, ``validation_epsilon``)."""
        replies = self._each("budget", lambda c: c.call("Budget", pb.BudgetRequest(
            dataset=self.dataset, delta=float(delta or 0.0), release_ids=self.release_ids.get(c.name, []) if delta else [])))
        return {name: r.budget for name, r in zip(self.sites, replies)}

    def close(self, *, wait: bool = True) -> Future | None:
        """Close every site's session (best effort: a site that is gone lets its session expire).

        ``wait=False`` returns at once with a future of the closing (None when nothing was open): a
        :class:`analyst.Federation` waits for it before its next session opens, so the sites' session
        caps see it closed, and keeps it off the end of a validation.
        """
        ids, self.session_ids = self.session_ids, {}
        unused, self._held = self._held, {}  # holds made with the sessions and never used
        with self._lock:  # and those of a release left before its commit (interrupted)
            pending, self._open_holds = self._open_holds, {}

        def close_one(conn):
            try:
                conn.call("CloseSession", pb.CloseSessionRequest(session_id=ids[conn.name]), timeout=5.0)
            except Exception:  # noqa: BLE001 - closing is best effort; the session expires anyway
                pass

        def close_all():
            for holds in (unused, pending):
                if holds:
                    self.cancel(holds)
            fan_out([c for c in self.connections if c.name in ids], close_one, executor=self.executor)

        if not ids:
            return None
        if wait or self.executor is None:
            close_all()
            return None
        # On its own thread: the fan-out itself runs on the executor, which must not wait on itself.
        closing: Future = Future()

        def run():
            try:
                close_all()
            finally:
                closing.set_result(None)

        threading.Thread(target=run, daemon=True).start()
        return closing

    def __enter__(self) -> "ValidationSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
