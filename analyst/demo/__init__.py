"""``dsroc demo``: five TLS site daemons on the GBSG2 data, validated through the network; local sites for studies."""

from analyst.demo.gbsg2 import prepare_gbsg2
from analyst.demo.local_sites import LocalFederation, write_local_federation
from analyst.demo.daemons import running_daemons
from analyst.demo.run import run_demo

__all__ = ["LocalFederation", "prepare_gbsg2", "run_demo", "running_daemons", "write_local_federation"]
