"""Make the SDK (sdk/python) importable by the policies' tests without installing it."""

import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[3] / "sdk" / "python"
if str(SDK) not in sys.path:
    sys.path.insert(0, str(SDK))
