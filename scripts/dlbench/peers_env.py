"""The peers environment (.venv-peers: PyTorch, ONNX Runtime, OpenVINO,
safetensors): heavy, never part of scripts/test or CI. Scripts that need it
call ensure() first; it re-executes them there, creating it on first use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-peers"
REQUIREMENTS = ROOT / "scripts" / "requirements-peers.txt"


def ensure(script: str) -> None:
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        print(f"{script}: creating .venv-peers from {REQUIREMENTS.name} (PyTorch from PyPI, a few GB)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(REQUIREMENTS)], check=True)
    os.execv(str(python), [str(python), *sys.argv])
