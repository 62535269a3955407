"""``python -m analyst`` runs the ``dsroc`` command."""

import sys

from analyst.cli import main

sys.exit(main())
