"""``dsroc-site check``: config, TLS files, state, every dataset's declared columns, populations and usability."""

from __future__ import annotations

__all__ = ["cmd_check"]


def _check_one(path) -> int:
    """Check one site config; print a line per item and return the number of problems."""
    from ..config import load_config
    from ..data.datasets import (Table, feature_values, open_table, outcome_values, read_error, score_values,
                                 time_values)
    from ..errors import SiteError
    from ..server import crl_serials, server_credentials

    config = load_config(path)
    problems = _check_state(config)
    if config.tls is not None:
        try:
            server_credentials(config)
            revoked = len(crl_serials(config))
            print(f"tls: ok ({'mutual TLS' if config.tls.client_ca else 'server certificate only'}"
                  f"{f'; {revoked} revoked client certificates' if revoked else ''})")
        except Exception as exc:  # noqa: BLE001 - reported to the administrator
            problems += 1
            print(f"tls: {exc}")
    else:
        print("tls: not configured (serve needs --insecure)")
    frames = {}  # whole tables, for the populations check (every column)

    def read(ds):
        frames[ds.name] = open_table(ds).load()
        return Table.from_frame(frames[ds.name], ds)

    for name, ds in config.datasets.items():
        try:
            table = read(ds)
        except Exception as exc:  # noqa: BLE001 - reported to the administrator, in one line
            problems += 1
            print(f"dataset {name}: cannot be read: {read_error(ds, exc)}")
            continue
        print(f"dataset {name}: {len(table)} rows, columns {list(table.columns)}")
        q = config.policy.privacy_level
        checks = [(c, "outcome", lambda c=c: _class_sizes(outcome_values(table, name, c), q)) for c in ds.outcomes]
        checks += [(c, "score", lambda c=c: score_values(table, name, c, ds.score_range)) for c in ds.scores]
        checks += [(c, "model", lambda c=c: feature_values(table, name, [c])) for c in ds.model_columns or ()]
        checks += [(c, "time", lambda c=c: time_values(table, name, c)) for c in ds.time_columns]
        for column, kind, check in checks:
            try:
                check()
                print(f"  {column}: ok ({kind} column)")
            except SiteError as exc:
                problems += 1
                print(f"  {column}: {exc} ({kind} column)")
    return problems + _check_populations(config, frames) + _check_usable(config)


def _class_sizes(labels, q: int) -> None:
    """Refuse an outcome column with a class below the privacy level: every release about it is refused."""
    from ..errors import FailedPrecondition

    n1 = int(labels.sum())
    n0 = int(labels.size) - n1
    if min(n0, n1) < q:
        raise FailedPrecondition(f"a class has fewer than q = {q} patients (negatives {n0}, positives {n1}): every "
                                 "release about this outcome is refused, under every protocol")


def _check_usable(config) -> int:
    """Print a problem (and return 1) when no analyst may use any dataset: nobody could use the site."""
    if not config.analysts:
        print("analysts: none configured: nobody can use this site (dsroc-site analyst add NAME)")
    elif not config.datasets:
        print("datasets: none configured: there is nothing to validate on (add a [datasets.NAME] table)")
    elif not any(a.may_use(d) for a in config.analysts.values() for d in config.datasets):
        print("analysts: no analyst may use any dataset (analysts.NAME.datasets)")
    else:
        return 0
    return 1


def _check_state(config) -> int:
    """Print the state's line (never creating it) and return 1 if it is lost or damaged."""
    from ..store.state import StateMarker, state_problem

    problem = state_problem(config)
    if problem:
        print(f"state: {problem} (serve refuses it: restore a backup, or --reset-state)")
        return 1
    marker = StateMarker.read(config.state_marker_path)
    print(f"state: ok ({config.state_dir}, first served {marker.first_served})" if marker
          else f"state: not served yet ({config.state_dir} is created by the first serve)")
    return 0


def cmd_check(args) -> int:
    """``dsroc-site check``: every config's problems; exit 1 if there are any."""
    problems = 0
    for path in args.config:
        if len(args.config) > 1:
            print(f"== {path}")
        problems += _check_one(path)
    print("no problems found" if not problems else f"{problems} problem(s) found")
    return 0 if not problems else 1


def _check_populations(config, tables) -> int:
    """Print the populations (entries sharing one budget) and entries that look like the same patients."""
    from ..data.populations import populations, suspected_shared_patients

    for names in populations(config).values():
        if len(names) > 1:
            print(f"population of datasets {', '.join(names)}: one privacy budget and history (the same patients)")
    notes = suspected_shared_patients(config, tables)
    for note in notes:
        print(f"populations: {note}")
    return len(notes)
