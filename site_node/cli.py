"""``dsroc-site``: set up, run and inspect a hospital's dsroc site daemon."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from datetime import datetime, timezone

__all__ = ["main", "build_parser", "package_version"]


def package_version() -> str:
    """The installed dsroc distribution's version (the source tree's pyproject when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsroc")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked (importlib.metadata costs every start ~35 ms)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {package_version()}")
        parser.exit()

DESCRIPTION = """\
dsroc-site runs a hospital's site for dsroc: a daemon that answers privacy-checked questions about a
prediction model's performance on local patient data, so that analysts can validate the model over
several hospitals without any patient record leaving any of them.

Quick start:
  dsroc-site init mysite              # example config, sample data, dev certificates, the analyst's files
  dsroc-site init --federation 2 fed  # or: two local sites and the analyst's fed/federation.toml
  $EDITOR mysite/site.toml            # your datasets, analysts and privacy policy
  dsroc-site check --config mysite/site.toml      # config, certificates and data columns
  dsroc-site serve --config mysite/site.toml
  dsroc-site budget --config mysite/site.toml     # privacy budget spent per dataset
  dsroc-site audit --config mysite/site.toml --last 20
"""


class _JsonFormatter(logging.Formatter):
    """Structured logs: one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
                 "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _cmd_init(args) -> int:
    from .init import init_federation, init_site

    if args.federation is not None:
        fed = init_federation(args.directory, args.federation, analyst=args.analyst, overwrite=args.force)
        for r in fed.sites:
            print(f"wrote {r.config} (site {r.name!r} on {r.address}, {r.dataset.name}: synthetic patients of its own)")
        print(f"wrote {fed.federation} (the analyst's federation file: tokens, CAs and client keys of every site)")
        print()
        configs = " ".join(f"--config {r.config}" for r in fed.sites)
        print(f"Check the sites:    dsroc-site check {configs}")
        print(f"Start the sites:    dsroc-site serve {configs} &")
        print(f"Validate:           dsroc validate --federation {fed.federation} --dataset sample --outcome y "
              "--score pred --epsilon 5 --delta 0.01 --out report")
        return 0
    result = init_site(args.directory, name=args.name, listen=args.listen, analyst=args.analyst,
                       overwrite=args.force)
    print(f"wrote {result.config}")
    print(f"      {result.dataset} (synthetic sample data)")
    print(f"      {result.pki.ca_cert.parent}/ (development CA, server and client certificates)")
    print(f"      {result.snippet.parent}/ (for the analyst: federation.toml, the token file, CA and client key)")
    print()
    print(f"Bearer token for analyst {result.analyst!r} (shown once; the config stores only its SHA-256):")
    print(f"  {result.token}")
    print()
    print(f"Give the analyst the folder {result.snippet.parent}/ over a safe channel; it connects with")
    print(f"  dsroc validate --federation {result.snippet} ...")
    print(f"Start the site with:  dsroc-site serve --config {result.config}")
    return 0


def _cmd_token(args) -> int:
    from .auth import hash_token, new_token

    token = new_token()
    print(f"token:        {token}")
    print(f"token_sha256: {hash_token(token)}")
    print("Put token_sha256 in the analyst's [analysts.NAME] table; give the token to the analyst.")
    return 0


def _cmd_serve(args) -> int:
    from .config import ConfigError, load_config
    from .server import SiteServer, return_freed_memory

    return_freed_memory()
    if args.listen is not None and len(args.config) > 1:
        raise ConfigError("--listen overrides the address of one site; give a single --config with it")
    configs = [load_config(path) for path in args.config]  # every config is checked before any site starts
    servers = [SiteServer(config, insecure=args.insecure, address=args.listen, max_workers=args.workers,
                          read_datasets_in_helper=True) for config in configs]
    if args.insecure:
        logging.getLogger("dsroc.site").warning("serving WITHOUT TLS (--insecure): for local development only")
    started = []
    try:
        for server in servers:
            started.append(server.start())
    except BaseException:
        for server in started:
            server.stop(grace=0)
        raise
    stopping = threading.Event()

    def on_signal(signum, frame):
        logging.getLogger("dsroc.site").info("received %s, shutting down", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for config, server in zip(configs, servers):
        print(json.dumps({"event": "serving", "address": server.bound_address, "site": config.name}), flush=True)
    while not stopping.wait(0.5):
        pass
    for server in servers:
        server.stop(grace=args.grace)
    return 0


def _check_one(path) -> int:
    """Check one site config; print a line per item and return the number of problems."""
    from .config import load_config
    from .datasets import DatasetStore, Table, feature_values, open_table, outcome_values, score_values
    from .errors import SiteError
    from .server import server_credentials

    config = load_config(path)
    problems = 0
    if config.tls is not None:
        try:
            server_credentials(config)
            print(f"tls: ok ({'mutual TLS' if config.tls.client_ca else 'server certificate only'})")
        except Exception as exc:  # noqa: BLE001 - reported to the administrator
            problems += 1
            print(f"tls: {exc}")
    else:
        print("tls: not configured (serve needs --insecure)")
    frames = {}  # whole tables, for the populations check (every column)

    def read(ds):
        frames[ds.name] = open_table(ds).load()
        return Table.from_frame(frames[ds.name], ds)

    store = DatasetStore(config.datasets, reader=read)
    for name, ds in config.datasets.items():
        try:
            table = store.table(name)
        except SiteError:
            problems += 1
            print(f"dataset {name}: cannot be read (see the log above)")
            continue
        print(f"dataset {name}: {len(table)} rows, columns {list(table.columns)}")
        q = config.policy.privacy_level
        checks = [(c, "outcome", lambda c=c: _class_sizes(outcome_values(table, name, c), q)) for c in ds.outcomes]
        checks += [(c, "score", lambda c=c: score_values(table, name, c, ds.score_range)) for c in ds.scores]
        checks += [(c, "model", lambda c=c: feature_values(table, name, [c])) for c in ds.model_columns or ()]
        for column, kind, check in checks:
            try:
                check()
                print(f"  {column}: ok ({kind} column)")
            except SiteError as exc:
                problems += 1
                print(f"  {column}: {exc} ({kind} column)")
    return problems + _check_populations(config, frames)


def _class_sizes(labels, q: int) -> None:
    """Refuse an outcome column with a class below the privacy level: every release about it is refused."""
    from .errors import FailedPrecondition

    n1 = int(labels.sum())
    n0 = int(labels.size) - n1
    if min(n0, n1) < q:
        raise FailedPrecondition(f"a class has fewer than q = {q} patients (negatives {n0}, positives {n1}): every "
                                 "release about this outcome is refused, under every protocol")


def _cmd_check(args) -> int:
    problems = 0
    for path in args.config:
        if len(args.config) > 1:
            print(f"== {path}")
        problems += _check_one(path)
    print("no problems found" if not problems else f"{problems} problem(s) found")
    return 0 if not problems else 1


def _check_populations(config, tables) -> int:
    """Print the populations (entries sharing one budget) and entries that look like the same patients."""
    from .populations import populations, suspected_shared_patients

    for names in populations(config).values():
        if len(names) > 1:
            print(f"population of datasets {', '.join(names)}: one privacy budget and history (the same patients)")
    notes = suspected_shared_patients(config, tables)
    for note in notes:
        print(f"populations: {note}")
    return len(notes)


def _cmd_budget(args) -> int:
    from dataclasses import replace

    from .config import load_config
    from dsroc.privacy.accounting import discretization_for

    from .ledger import SqliteLedger

    config = load_config(args.config)
    ledger = SqliteLedger(config.ledger_path, interval=discretization_for(config.policy.budget_epsilon))
    try:
        statuses = [replace(ledger.budget(ds.population, config.policy), dataset=name)
                    for name, ds in config.datasets.items()]
        history = ledger.history()
    finally:
        ledger.close()
    if args.json:
        print(json.dumps({"budgets": [dict(vars(b), mu_remaining=b.mu_remaining, epsilon_remaining=b.epsilon_remaining)
                                      for b in statuses], "releases": history}, indent=2))
        return 0
    print(f"budget per population (the patients behind one or more datasets): epsilon {config.policy.budget_epsilon}, "
          f"delta {config.policy.budget_delta}" if statuses else "no datasets configured")
    for b in statuses:
        print(f"  {b.dataset:<20} releases {b.releases:>3}   spent epsilon {b.epsilon_spent:.4f} at delta "
              f"{b.budget_delta}   remaining about epsilon {b.epsilon_remaining:.4f}")
    if history:
        print("releases:")
        for r in history:
            print(f"  {r['created']} {r['analyst']:<12} {r['dataset']:<12} {r['kind']:<9} eps {r['epsilon']:g} "
                  f"delta {r['delta']:g} ({r['rule']})  {r['source']}")
    return 0


def _cmd_audit(args) -> int:
    from .audit import read_audit
    from .config import load_config

    config = load_config(args.config)
    for entry in read_audit(config.audit_path, last=args.last):
        if args.json:
            print(json.dumps(entry, sort_keys=True))
        else:
            cost = f" mu {entry['privacy_cost']:.4f}" if entry.get("privacy_cost") else ""
            message = f" - {entry['message']}" if entry.get("message") else ""
            print(f"{entry['time']} {entry['analyst'] or '-':<12} {entry['call']:<18} {entry['decision']}{cost}{message}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dsroc-site``."""
    parser = argparse.ArgumentParser(prog="dsroc-site", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction, help="show the program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", help="write an example site folder (config, sample data, dev certificates, token)",
                       description="Write DIRECTORY/site.toml (a commented example config), data/sample.csv "
                       "(synthetic patients, drawn per site name) and pki/ (a development CA, server and client "
                       "certificates), and print a bearer token for a first analyst; the config stores only its "
                       "SHA-256. analyst/ holds what the analyst needs: federation.toml (a [[sites]] table that "
                       "'dsroc validate --federation' accepts as is), the token file (mode 0600), the CA and the "
                       "client certificate and key. For production, replace the development certificates with "
                       "ones of the hospital's own PKI.")
    p.add_argument("directory", help="folder to create")
    p.add_argument("--name", default="hospital", help="site name shown to analysts (default: hospital)")
    p.add_argument("--listen", default="127.0.0.1:50051", help="listen address (default: 127.0.0.1:50051)")
    p.add_argument("--analyst", default="analyst1", help="name of the first analyst (default: analyst1)")
    p.add_argument("--force", action="store_true", help="overwrite an existing site.toml")
    p.add_argument("--federation", type=int, default=None, metavar="N",
                   help="set up N local sites DIRECTORY/site1 ... on free loopback ports and the analyst's "
                        "DIRECTORY/federation.toml (ignores --name and --listen)")
    p.set_defaults(func=_cmd_init)

    p = sub.add_parser("token", help="make a new analyst token and print it with its SHA-256 for the config",
                       description="Print a new random bearer token and its SHA-256. Put the hash in "
                       "[analysts.NAME] token_sha256 and give the token to the analyst over a safe channel.")
    p.set_defaults(func=_cmd_token)

    p = sub.add_parser("serve", help="run the daemon until SIGTERM/SIGINT (graceful shutdown)",
                       description="Run the site daemon. TLS (mutual TLS when tls.client_ca is set) unless "
                       "--insecure, which is refused on any but a loopback address. Prints "
                       '{"event": "serving", "address": ...} on stdout once listening, JSON logs on stderr; the '
                       "standard gRPC health service reports SERVING. On SIGTERM or SIGINT health turns NOT_SERVING, "
                       "running calls get --grace seconds, then the daemon exits 0. Exit 2 on a config error.")
    p.add_argument("--config", required=True, action="append", help="site TOML file (repeat to run several "
                   "local sites in one process, e.g. the sites of 'init --federation')")
    p.add_argument("--insecure", action="store_true", help="plain text instead of TLS; local development only, so only on a loopback address")
    p.add_argument("--listen", default=None, help="override the config's listen address")
    p.add_argument("--workers", type=int, default=8, help="concurrent calls (default: 8); one analyst may use half of them")
    p.add_argument("--grace", type=float, default=5.0, help="seconds to finish running calls on shutdown")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("check", help="check the config, TLS files and every dataset's declared columns",
                       description="Load the config, read the TLS files and every dataset, and check each "
                       "declared outcome, score and model column. Exit 1 if any problem was found.")
    p.add_argument("--config", required=True, action="append", help="site TOML file (repeat for several sites)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("budget", help="privacy budget spent per dataset, and every release",
                       description="Show the privacy budget spent and left per dataset (Gaussian-DP composition) "
                       "and every release in the ledger: time, analyst, epsilon, delta, sensitivity, noise.")
    p.add_argument("--config", required=True, help="site TOML file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_budget)

    p = sub.add_parser("audit", help="recent audit-log entries (every request, accepted or refused)",
                       description="Show the last entries of the append-only audit log: every request, "
                       "accepted or refused, with analyst, call, decision and privacy cost.")
    p.add_argument("--config", required=True, help="site TOML file")
    p.add_argument("--last", type=int, default=50, help="number of entries (default: 50)")
    p.add_argument("--json", action="store_true", help="print the raw JSON lines")
    p.set_defaults(func=_cmd_audit)

    from .model_cli import add_model_parser

    add_model_parser(sub)
    return parser


def main(argv=None) -> int:
    """Entry point of ``dsroc-site``."""
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    from .config import ConfigError

    try:
        return args.func(args)
    except (ConfigError, FileExistsError, OSError, ValueError) as exc:
        print(f"dsroc-site: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
