"""What every command-line script shares: how it ends.

    if __name__ == "__main__":
        cli.run(main)

A reader that closes the pipe early (`scripts/results compare 1 1 | head`)
is not an error of the script: it ends quietly, with the status a shell
gives a command killed by SIGPIPE (141), instead of a BrokenPipeError
traceback. Python raises that error on the write into the closed pipe, and
once more when it flushes stdout at exit: stdout is pointed at /dev/null
first, so the second one cannot happen.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

EXIT_SIGPIPE = 128 + 13


def quiet_on_closed_pipe() -> int:
    """Called on a BrokenPipeError: silence stdout for the exit, and the status to exit with."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_SIGPIPE


def run(main: Callable[[], int | None]) -> None:
    """sys.exit(main()), ending quietly when the reader of stdout has gone."""
    try:
        status = main()
        sys.stdout.flush()  # here, so that a closed pipe is seen while it can still be caught
    except BrokenPipeError:
        status = quiet_on_closed_pipe()
    sys.exit(status)
