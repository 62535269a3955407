"""Helpers for tests, benchmarks and demos: real site servers in-process, daemons in subprocesses, site configs."""

from .configs import POLICY, tls_section, write_site_config
from ..launcher import CHECKOUT, Daemon, DaemonFailed, stop_all
from .servers import running_server, running_site, site_channel, site_stub

__all__ = ["running_site", "running_server", "site_channel", "site_stub", "Daemon", "DaemonFailed", "stop_all",
           "CHECKOUT", "write_site_config", "tls_section", "POLICY"]
