"""Running a script in the virtual environment that has its packages.

dlbench's scripts start with `#!/usr/bin/env python3`, so run as README
shows them they start in the system Python. reexec() moves them into their
environment before anything imports a package from it: .venv (matplotlib,
numpy, scipy; made by scripts/setup) for plot, compare, readme and the other
result scripts, .venv-peers (PyTorch, ONNX Runtime, OpenVINO; made here on
first use) for peers and train.py; DLB_PEERS_VENV=system keeps the peers in
the interpreter they were started with. Imports nothing outside the standard
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


# DLB_PEERS_VENV's word for "the interpreter the script was started with":
# a machine whose system Python holds PyTorch and where no environment can
# be made (the GPU kit's lent machine).
SYSTEM = "system"


def peers_venv() -> Path | None:
    """The peers' environment: .venv-peers, or the one DLB_PEERS_VENV names
    (relative to the repository), e.g. .venv to run only the peers whose
    packages it has (the tests do); None for DLB_PEERS_VENV=system, the
    interpreter that runs the script, whatever it is (nothing is installed)."""
    named = os.environ.get("DLB_PEERS_VENV")
    if named == SYSTEM:
        return None
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


# Written into an environment made from requirements once pip has installed
# them all: one without it (an install interrupted or failed, which leaves a
# Python with no packages) is completed before it is used.
INSTALLED = ".dlbench-installed"


def installed(venv: Path) -> bool:
    """Whether `venv`, made from requirements by reexec, has them all."""
    return (venv / INSTALLED).exists()


def _help_requested() -> bool:
    return any(a in ("-h", "--help") for a in sys.argv[1:])


def reexec(script: str, venv: Path | None = VENV, requirements: Path | None = None) -> None:
    """Re-executes this process's command line with `venv`'s Python, unless it
    already runs there (or `venv` is None: the current interpreter, as it
    is), where it takes scripts/ off sys.path. A missing
    .venv is a one-line message naming scripts/setup (exit 2). With
    `requirements`, an environment without them all (missing, or left
    incomplete by an install that did not finish) is created or completed
    from them first, except for --help, which prints the script's docstring
    in the system Python instead of installing a few GB; a failed install
    is a one-line message (exit 2) and is retried on the next run."""
    if venv is None:
        _unshadow_stdlib()
        return
    python = venv / "bin" / "python"
    if Path(sys.prefix).resolve() == venv.resolve():
        _unshadow_stdlib()
        return
    if requirements is not None and not installed(venv):
        if _help_requested():
            print((sys.modules["__main__"].__doc__ or "").strip())
            sys.exit(0)
        if python.exists():
            print(f"{script}: {venv.name} is incomplete (an earlier install did not finish): installing "
                  f"{requirements.name} into it", file=sys.stderr)
        else:
            print(f"{script}: creating {venv.name} from {requirements.name} (PyTorch from PyPI, a few GB)",
                  file=sys.stderr)
            if subprocess.run([sys.executable, "-m", "venv", str(venv)]).returncode != 0:
                print(f"{script}: could not create {venv.name} with {sys.executable} -m venv", file=sys.stderr)
                sys.exit(2)
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "-r", str(requirements)])
        if pip.returncode != 0:
            print(f"{script}: installing {requirements.name} into {venv.name} failed (pip exit {pip.returncode}); "
                  "run the command again to retry", file=sys.stderr)
            sys.exit(2)
        (venv / INSTALLED).write_text(f"{requirements.name} installed\n")
    elif not python.exists():
        print(f"{script}: {venv.name}/ not found: run scripts/setup (it installs what the scripts need)",
              file=sys.stderr)
        sys.exit(2)
    os.execv(str(python), [str(python), *sys.argv])
