"""Running a script in the virtual environment that has its packages.

dlbench's scripts start with `#!/usr/bin/env python3`, so run as README
shows them they start in the system Python. reexec() moves them into their
environment before anything imports a package from it: .venv (matplotlib,
numpy, scipy; made by scripts/setup) for plot, compare, readme and the other
result scripts, .venv-peers (PyTorch, ONNX Runtime, OpenVINO; made here on
first use) for peers and train.py. Imports nothing outside the standard
library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
PEERS_VENV = ROOT / ".venv-peers"
PEERS_REQUIREMENTS = ROOT / "scripts" / "requirements-peers.txt"


def peers_venv() -> Path:
    """The peers' environment: .venv-peers, or the one DLB_PEERS_VENV names
    (relative to the repository), e.g. .venv to run only the peers whose
    packages it has (the tests do)."""
    named = os.environ.get("DLB_PEERS_VENV")
    return (ROOT / named) if named else PEERS_VENV


def _unshadow_stdlib() -> None:
    """Takes scripts/ off sys.path once the script runs in its environment
    (it has imported dlbench; the package's modules still resolve through
    it): scripts/profile.py shadows the standard library's profile, which
    torch._dynamo imports through cProfile (torch.compile, an optimizer
    step), and imported from scripts/ it would re-execute the running
    command in .venv."""
    scripts = ROOT / "scripts"
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != scripts]


def reexec(script: str, venv: Path = VENV, requirements: Path | None = None) -> None:
    """Re-executes this process's command line with `venv`'s Python, unless it
    already runs there, where it takes scripts/ off sys.path. A missing
    .venv is a one-line message naming scripts/setup (exit 2); with
    `requirements`, a missing venv is created from them instead."""
    python = venv / "bin" / "python"
    if Path(sys.prefix).resolve() == venv.resolve():
        _unshadow_stdlib()
        return
    if not python.exists():
        if requirements is None:
            print(f"{script}: {venv.name}/ not found: run scripts/setup (it installs what the scripts need)",
                  file=sys.stderr)
            sys.exit(2)
        print(f"{script}: creating {venv.name} from {requirements.name} (PyTorch from PyPI, a few GB)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(requirements)], check=True)
    os.execv(str(python), [str(python), *sys.argv])

