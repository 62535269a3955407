"""``dsroc-site``: set up, run and inspect a hospital's dsroc site daemon."""

from __future__ import annotations

import argparse
import json
import logging
import os
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
  dsroc-site analyst add alice --config mysite/site.toml        # hand out access (revoke: live)
  dsroc-site backup --config mysite/site.toml BACKUPDIR         # daily; restore BACKUPDIR after a loss
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
    print(f"      {result.pki.ca_cert.parent}/ (development CA certificate, server certificate and key)")
    print(f"wrote {result.pki.ca_key} (the CA's private key, outside the served folder: keep it offline; "
          "dsroc-site analyst add signs with it)")
    print(f"wrote {result.snippet.parent}/ (for the analyst: federation.toml, the token file, CA and client key)")
    print()
    print(f"Bearer token for analyst {result.analyst!r} (shown once; the config stores only its SHA-256):")
    print(f"  {result.token}")
    print()
    print(f"Give the analyst the folder {result.snippet.parent}/ over a safe channel; it connects with")
    print(f"  dsroc validate --federation {result.snippet} ...")
    print(f"Start the site with:  dsroc-site serve --config {result.config}")
    return 0


def _cmd_token(args) -> int:
    from ..interceptors.auth import hash_token, new_token

    token = new_token()
    print(f"token:        {token}")
    print(f"token_sha256: {hash_token(token)}")
    print("Put token_sha256 in the analyst's [analysts.NAME] table; give the token to the analyst.")
    return 0


def _cmd_serve(args) -> int:
    from ..config import ConfigError, load_config
    from ..server import SiteServer
    from ..store.state import write_pid_file

    if args.listen is not None and len(args.config) > 1:
        raise ConfigError("--listen overrides the address of one site; give a single --config with it")
    configs = [load_config(path) for path in args.config]  # every config is checked before any site starts
    servers = []
    try:
        for config in configs:
            servers.append(SiteServer(config, insecure=args.insecure, address=args.listen, max_workers=args.workers,
                                      read_datasets_in_helper=True, reset_state=args.reset_state,
                                      warm_up=True, trim_memory=True))
    except BaseException:
        for server in servers:
            server.stop(grace=0)
        raise
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
    stopping, reloading = threading.Event(), threading.Event()

    def on_signal(signum, frame):
        logging.getLogger("dsroc.site").info("received %s, shutting down", signal.Signals(signum).name)
        stopping.set()

    def on_hangup(signum, frame):
        reloading.set()
        stopping.set()  # wakes the loop below, which reloads and goes on

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_hangup)
    pid_files = [write_pid_file(config) for config in configs]
    for config, server in zip(configs, servers):
        print(json.dumps({"event": "serving", "address": server.bound_address, "site": config.name}), flush=True)
    while True:
        stopping.wait(0.5)
        if reloading.is_set():
            reloading.clear()
            stopping.clear()
            logging.getLogger("dsroc.site").info("received SIGHUP, reloading the analysts")
            for server in servers:
                server.reload()
        elif stopping.is_set():
            break
    for server, pid_file in zip(servers, pid_files):
        server.stop(grace=args.grace)
        pid_file.unlink(missing_ok=True)
    return 0


def _cmd_budget(args) -> int:
    from dataclasses import replace

    from ..config import load_config
    from dsroc.privacy.accounting import discretization_for

    from ..store.ledger import SqliteLedger
    from ..store.state import check_state

    config = load_config(args.config)
    check_state(config)
    # A read-only command: a site that has not served yet shows an empty ledger, kept in memory.
    interval = discretization_for(config.policy.budget_epsilon)
    ledger = SqliteLedger(config.ledger_path if config.ledger_path.exists() else None, interval=interval)
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
    from ..config import load_config
    from ..interceptors.audit import read_audit
    from ..store.state import check_state

    config = load_config(args.config)
    check_state(config)
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
    from .check import cmd_check

    parser = argparse.ArgumentParser(prog="dsroc-site", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction, help="show the program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", help="write an example site folder (config, sample data, dev certificates, token)",
                       description="Write DIRECTORY/site.toml (a commented example config), data/sample.csv "
                       "(synthetic patients, drawn per site name) and pki/ (a development CA certificate, server "
                       "certificate and key), and print a bearer token for a first analyst; the config stores only "
                       "its SHA-256. Outside DIRECTORY, the folder the site serves from: DIRECTORY-ca/ca.key (the "
                       "CA's private key; dsroc-site analyst add signs with it) and DIRECTORY-ANALYST/, what the "
                       "analyst needs: federation.toml (a [[sites]] table that 'dsroc validate --federation' "
                       "accepts as is), the token file (mode 0600), the CA certificate and their client certificate "
                       "and key. For production, replace the development certificates with ones of the hospital's "
                       "own PKI.")
    p.add_argument("directory", help="folder to create")
    p.add_argument("--name", default="hospital", help="site name shown to analysts (default: hospital)")
    p.add_argument("--listen", default=None, help="listen address host:port (default: a free port on 127.0.0.1)")
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
                       "standard gRPC health service reports SERVING once the datasets are read and prepared (NOT_SERVING before). On SIGTERM or SIGINT health turns NOT_SERVING, "
                       "running calls get --grace seconds, then the daemon exits 0. Exit 2 on a config error, and when the site "
                       "served before and its state/ is missing, empty, another's or damaged (see restore and "
                       "--reset-state).")
    p.add_argument("--config", required=True, action="append", help="site TOML file (repeat to run several "
                   "local sites in one process, e.g. the sites of 'init --federation')")
    p.add_argument("--insecure", action="store_true", help="plain text instead of TLS; local development only, so only on a loopback address")
    p.add_argument("--listen", default=None, help="override the config's listen address")
    p.add_argument("--workers", type=int, default=8, help="concurrent calls (default: 8); one analyst may use half of them")
    p.add_argument("--grace", type=float, default=5.0, help="seconds to finish running calls on shutdown")
    p.add_argument("--reset-state", action="store_true",
                   help="the state is lost or damaged and there is no backup: move it aside and start from a full "
                        "budget (audited; refused while the state is intact)")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("check", help="check the config, TLS files and every dataset's declared columns",
                       description="Load the config, read the TLS files and every dataset, and check each "
                       "declared outcome, score and model column. Exit 1 if any problem was found.")
    p.add_argument("--config", required=True, action="append", help="site TOML file (repeat for several sites)")
    p.set_defaults(func=cmd_check)

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

    from .analyst import add_analyst_parser
    from .model import add_model_parser
    from .state import add_state_parsers

    add_analyst_parser(sub)
    add_model_parser(sub)
    add_state_parsers(sub)
    return parser


class _StderrHandler(logging.StreamHandler):
    """A log handler writing to whatever ``sys.stderr`` is when a record is emitted, not the stream it was made with:
    a caller that runs ``main`` in its own process (a notebook, a test) and later replaces or closes that stream
    gets no "Logging error" from the records of later work."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler sets it; the current sys.stderr is always used
        pass


def main(argv=None) -> int:
    """Entry point of ``dsroc-site``."""
    args = build_parser().parse_args(argv)
    handler = _StderrHandler()
    handler.setFormatter(_JsonFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    from ..config import ConfigError

    try:
        return args.func(args)
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ConfigError, FileExistsError, OSError, ValueError) as exc:
        print(f"dsroc-site: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
