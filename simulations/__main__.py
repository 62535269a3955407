"""Command line: ``python -m simulations run ...`` and ``python -m simulations report DIR``."""

from .cli import main

raise SystemExit(main())
