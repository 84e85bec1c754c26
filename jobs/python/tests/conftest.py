"""Make wasmsched_job importable without installing it (``pytest jobs/python`` from anywhere)."""

import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
if str(PACKAGE) not in sys.path:
    sys.path.insert(0, str(PACKAGE))
