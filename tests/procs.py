"""Real subprocesses stopped by a real SIGTERM, for the tests of clean stops (a run, a bench, a sweep)."""

import os
import signal
import subprocess
import time
from typing import Callable, Optional


def sigterm_when(proc: subprocess.Popen, ready: Callable[[], bool], *, what: str, timeout_s: float = 120.0,
                 before: Optional[Callable[[], None]] = None) -> str:
    """Wait until ``ready()`` (failing if ``proc`` ends first or ``timeout_s`` passes: "``what`` within N s"),
    call ``before``, send SIGTERM and return what the process wrote to its pipes (stdout, then stderr) by the
    time it ended; a process still alive on the way out (a failed check) is killed."""
    try:
        deadline = time.time() + timeout_s
        while not ready():
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}:\n"
                                     + ((out or b"") + (err or b"")).decode(errors="replace")[-3000:])
            assert time.time() < deadline, f"no {what} within {timeout_s:.0f} s"
            time.sleep(0.2)
        if before is not None:
            before()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    return ((out or b"") + (err or b"")).decode(errors="replace")


def metric_rows(run_dir) -> int:
    """The rows of a run's metrics.csv so far (0 before it exists): a run is training once there are some."""
    try:
        with open(os.path.join(run_dir, "metrics.csv")) as f:
            return max(sum(1 for _ in f) - 1, 0)
    except FileNotFoundError:
        return 0
