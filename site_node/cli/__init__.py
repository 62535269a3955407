"""``dsroc-site``: the site's command line (``site_node.cli:main``), one module per group of subcommands."""

# Not init: it imports pandas and scipy, which the daemon that ``dsroc-site serve`` runs never loads.

from .main import build_parser, main, package_version

__all__ = ["build_parser", "main", "package_version"]
