"""Make the SDK importable without installing it (``pytest sdk/python`` from anywhere)."""

import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[1]
if str(SDK) not in sys.path:
    sys.path.insert(0, str(SDK))
