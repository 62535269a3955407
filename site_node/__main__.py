"""``python -m site_node``: the same as ``dsroc-site``."""

import sys

from .cli import main

sys.exit(main())
