"""What every command-line script shares: how it ends.

    if __name__ == "__main__":
        cli.run(main)

A results file that cannot be read (dlbench.results.ResultsError, which
names the file and the problem) that main lets through is bad input: its
message on stderr, after the script's name, and exit status 2.

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
from pathlib import Path
from typing import Callable

from dlbench.results import ResultsError

EXIT_SIGPIPE = 128 + 13
EXIT_BAD_INPUT = 2


def quiet_on_closed_pipe() -> int:
    """Called on a BrokenPipeError: silence stdout for the exit, and the status to exit with."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_SIGPIPE


def run(main: Callable[[], int | None]) -> None:
    """sys.exit(main()), ending quietly when the reader of stdout has gone,
    with status 2 on a results file that cannot be read."""
    try:
        status = main()
        sys.stdout.flush()  # here, so that a closed pipe is seen while it can still be caught
    except BrokenPipeError:
        status = quiet_on_closed_pipe()
    except ResultsError as e:
        print(f"{Path(sys.argv[0]).name}: {e}", file=sys.stderr)
        status = EXIT_BAD_INPUT
    sys.exit(status)
