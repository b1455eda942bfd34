"""Runtimes: what runs a training loop and moves data between the plain agent classes.

    session.py      RunSession: run directory, counters, logger, progress, checkpoints, stop status, summary
    common.py       the IMPALA/A2C learner side shared by local.py (one process) and ray_runtime.py (Ray)
    ppo.py          the PPO loop (one process)
    pipeline.py     dispatch by algo and runtime kind; the two-stage stem pipeline

Code outside ``r2ac/runtime`` imports the names below from ``r2ac.runtime``.
"""

from r2ac.runtime.common import TrainingSession, autos_line, build_net, make_env, resolve_model, resolved_autos
from r2ac.runtime.session import (RunAborted, RunSession, frames_per_step, resolve_device, run_dir_of,
                                  set_fast_math, sigterm_as_interrupt, stop_status)

__all__ = ["RunAborted", "RunSession", "TrainingSession", "autos_line", "build_net", "frames_per_step", "make_env",
           "resolve_device", "resolve_model", "resolved_autos", "run_dir_of", "set_fast_math", "sigterm_as_interrupt",
           "stop_status"]
