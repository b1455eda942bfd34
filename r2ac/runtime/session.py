"""What every training run has, whatever its algorithm: the run directory (fresh or resumed), counters, the
logger (CSV, TensorBoard, W&B), the progress bar, the events log, checkpoints, the stop status and the
summary. :class:`RunSession` holds them; the IMPALA/A2C learner side (``r2ac.runtime.common.TrainingSession``,
fed by the local and the Ray runtime) and the PPO loop (``r2ac.runtime.ppo.PPOSession``) build on it.

A run goes:

    ckpt = prepare_run(cfg, resume)      # fresh or resumed; fast CPU math; seeds
    create_run_dir(cfg)                  # the directory and its config.yaml
    session = SomeSession(cfg, ckpt, ...)   # network, learner; restores the checkpoint; logger, bar
    summary = session.run(loop)          # loop() trains until session.done(); the summary says why it ended
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import dataclasses
import json
import math
import os
import platform
import signal
import sys
import threading
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from r2ac.checkpoint import capture_rng_state, load_latest_checkpoint, restore_rng_state, save_run_checkpoint
from r2ac.config import Config, ConfigError, config_to_dict, save_config
from r2ac.envs import parse_env_id
from r2ac.logger import RunLogger, plot_learning_curve, progress

# Emulator frames per agent step where the env repeats actions (used for env_frames_per_s).
_FRAMES_PER_STEP = {"atari": 4, "dmlab": 4}


class RunAborted(RuntimeError):
    """The run cannot go on (e.g. every rollout fails, or the learner process died); its last
    checkpoint is kept and ``r2ac train --resume RUN_DIR`` continues it once the cause is fixed."""


#: glibc's mallopt parameters (malloc.h) and the values ``keep_freed_memory`` sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit systems
_TRIM_THRESHOLD = 1 << 30

_malloc_kept: Optional[bool] = None


def keep_freed_memory() -> bool:
    """On glibc (Linux), keep freed memory in the process for reuse instead of handing it back to the system:
    blocks up to 32 MiB come from the heap, not from their own mmap, and the heap's top is trimmed only past
    1 GiB free. Every RTRL segment allocates its sensitivities afresh (tens of MB for pixel inputs), and with
    glibc's defaults the pages of each were handed back and faulted in again (docs/benchmarks.md, "Faster
    steps", measures the whole run; tests/runtime/test_fast_math.py reads the setting back). The price: what the
    process frees stays reserved for its next allocation, so its resident memory does not shrink between
    segments. A no-op elsewhere; returns whether
    the settings took. Once per process."""
    global _malloc_kept
    if _malloc_kept is None:
        _malloc_kept = False
        if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
            try:
                libc = ctypes.CDLL("libc.so.6")
            except OSError:
                return False
            # both set explicitly: setting one alone stops glibc adapting the other (measured slower)
            _malloc_kept = bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
                libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    return _malloc_kept


def set_fast_math(torch_threads: int = 1) -> None:
    """Flush denormal floats to zero on CPU: RTRL sensitivities and gate products decay geometrically,
    and denormal arithmetic made CPU training 2-6x slower (measured). Set the intra-op thread count
    (``runtime.torch_threads``): with the small per-step work of actors, OpenMP threads that spin while
    other processes share the cores made a 2-core run 15x slower with 2 threads than with 1 (measured).
    Keep freed memory for reuse (``keep_freed_memory``)."""
    torch.set_flush_denormal(True)
    keep_freed_memory()
    # numpy's float info, computed lazily, then warns that the smallest subnormal is zero: expected here
    warnings.filterwarnings("ignore", message="The value of the smallest subnormal", category=UserWarning)
    if torch_threads > 0:
        torch.set_num_threads(torch_threads)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available; use device=cpu or device=auto")
    return torch.device(name)


def run_dir_of(cfg: Config) -> str:
    return cfg.run_dir or os.path.join("runs", cfg.name)


def frames_per_step(cfg: Config) -> int:
    """Emulator frames per agent step (the action repeat): 4 for Atari/DMLab unless configured, else 1."""
    kind = parse_env_id(cfg.env.id)[0]
    opts = dict(cfg.env.options)
    return int(opts.get("frame_skip", opts.get("action_repeat", _FRAMES_PER_STEP.get(kind, 1))))


def env_seed(cfg: Config, index: int) -> int:
    """The seed of the envs of actor ``index`` (``index`` >= 100 for envs rebuilt after failures)."""
    return cfg.seed * 1000 + index


def actor_seed(cfg: Config, index: int, updates: int) -> int:
    """The action-sampling seed of actor ``index`` started after ``updates`` learner updates (a resumed run
    samples new actions instead of replaying the first ones). One formula for the local and Ray runtimes."""
    return cfg.seed * 1000 + index + 7919 * updates


def checkpoint_to_resume(run_dir: str, resume: bool) -> Optional[dict]:
    """The newest checkpoint of ``run_dir`` when resuming (an error if there is none), ``None`` for a fresh
    run (an error if the directory already holds checkpoints: a fresh run must not overwrite them)."""
    if resume:
        ckpt = load_latest_checkpoint(run_dir)
        if ckpt is None:
            raise FileNotFoundError(f"--resume {run_dir}: no checkpoint found in {run_dir}/checkpoints")
        return ckpt
    if load_latest_checkpoint(run_dir) is not None:
        raise FileExistsError(
            f"run directory {run_dir} already holds checkpoints: continue it with `r2ac train --resume {run_dir}` "
            f"or choose another run_dir=... / name=...")
    return None


def prepare_run(cfg: Config, resume: bool) -> Optional[dict]:
    """Check the run directory (see :func:`checkpoint_to_resume`), set fast CPU math and seed torch's and
    numpy's global RNGs; returns the checkpoint to resume from (``None`` for a fresh run)."""
    ckpt = checkpoint_to_resume(run_dir_of(cfg), resume)
    set_fast_math(cfg.runtime.torch_threads)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    return ckpt


def create_run_dir(cfg: Config) -> str:
    """Create the run directory and write the resolved config there (``config.yaml``)."""
    run_dir = run_dir_of(cfg)
    os.makedirs(run_dir, exist_ok=True)
    save_config(cfg, os.path.join(run_dir, "config.yaml"))
    return run_dir


def start_run(cfg: Config, resume: bool) -> Optional[dict]:
    """:func:`prepare_run` and :func:`create_run_dir`: the start of an IMPALA/A2C run."""
    ckpt = prepare_run(cfg, resume)
    create_run_dir(cfg)
    return ckpt


def stop_status(exc: BaseException) -> str:
    """The summary status of a run that ended by raising ``exc``."""
    from r2ac.agent.learner import NonFiniteLossError

    if isinstance(exc, NonFiniteLossError):
        return "stopped: non-finite loss"
    if isinstance(exc, RunAborted):
        return "stopped: rollouts keep failing"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"failed: {type(exc).__name__}"


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` in the main thread, as Ctrl-C does, so a
    driver (the Ray runtime's, a bench's) stops its workers and writes what it has. Nothing outside the main
    thread; the previous handler is restored at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_DEFAULT_HANDLERS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


@contextlib.contextmanager
def _stop_on_signals(session: "RunSession"):
    """SIGINT/SIGTERM as a clean stop of ``session`` (see :meth:`RunSession.run`). Yields a list: the names
    of the signals caught, with ``"finishing"`` appended once the loop has ended. Outside the main thread
    (a Ray actor's method, a thread) it installs nothing."""
    caught: List[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def on_signal(signum, frame):
        name = signal.Signals(signum).name
        if "finishing" in caught:
            print(f"{name}: ignored while the final checkpoint is written", file=sys.stderr, flush=True)
            return
        caught.append(name)
        if len(caught) > 1:
            raise KeyboardInterrupt(f"stopped by a second signal ({name})")
        session.stop_requested = True
        print(f"\n{name}: stopping after the update in progress, then a checkpoint ... "
              "(send it again to stop at once)", file=sys.stderr, flush=True)

    mine = [s for s, default in _DEFAULT_HANDLERS.items() if signal.getsignal(s) is default]
    for s in mine:
        signal.signal(s, on_signal)
    try:
        yield caught
    finally:
        for s in mine:
            signal.signal(s, _DEFAULT_HANDLERS[s])


class SuccessStop:
    """The ``stop`` section: a run ends once the mean success over the last ``window`` episodes has reached
    ``threshold``, ``hold_steps`` agent steps after it first did. The success is ``info["success"]`` where
    the env reports one (the episodes that did), else the episode return; the window must be full.
    ``threshold`` 0 never stops. The bench's judge (``r2ac bench memory``) reads the same mean from
    metrics.csv, over the log rows that hold the last ``window`` episodes."""

    def __init__(self, threshold: float = 0.0, window: int = 400, hold_steps: int = 0):
        self.threshold, self.hold_steps = float(threshold), int(hold_steps)
        self.returns: collections.deque = collections.deque(maxlen=window)
        self.successes: collections.deque = collections.deque(maxlen=window)
        self.reached_step: Optional[int] = None  # the agent step at which the mean first reached the threshold
        self.reached_mean: Optional[float] = None
        self._fresh = False  # episodes came in since the last look

    def extend(self, returns: Sequence[float], successes: Sequence[float] = ()) -> None:
        self.returns.extend(float(r) for r in returns)
        self.successes.extend(float(s) for s in successes)
        self._fresh = True

    def mean(self) -> Optional[float]:
        """The mean over the last ``window`` episodes (successes where any episode reported one); None while
        fewer have ended."""
        values = self.successes if self.successes else self.returns
        return float(np.mean(values)) if len(values) == values.maxlen else None

    def due(self, step: int) -> bool:
        """Whether the run should end at agent step ``step``."""
        if self.threshold <= 0:
            return False
        if self.reached_step is None and self._fresh:
            self._fresh = False
            m = self.mean()
            if m is not None and m >= self.threshold:
                self.reached_step, self.reached_mean = int(step), m
        return self.reached_step is not None and step >= self.reached_step + self.hold_steps


class RecentEpisodes:
    """Episode returns/lengths (and successes, where the env reports them) finished since the last log row,
    plus a longer window of returns for the bar; each episode also goes to ``stop`` (the run's
    :class:`SuccessStop`) when there is one."""

    def __init__(self, window: int = 100, stop: Optional[SuccessStop] = None):
        self.pending: List[tuple] = []
        self.pending_success: List[float] = []
        self.window = collections.deque(maxlen=window)
        self.count = 0
        self.stop = stop

    def extend(self, episodes, successes=()) -> None:
        """Finished episodes as (return, length) pairs, and the successes of those that reported one."""
        episodes, successes = list(episodes), [float(s) for s in successes]
        for r, n in episodes:
            self.pending.append((r, n))
            self.window.append(r)
            self.count += 1
        self.pending_success.extend(successes)
        if self.stop is not None:
            self.stop.extend([r for r, _ in episodes], successes)

    def add(self, traj: Dict) -> None:
        """The episodes that ended inside a trajectory (steps 1..M)."""
        ret = traj["episode_return"][1:]
        done = ~torch.isnan(ret)
        if done.any():
            success = traj["episode_success"][1:][done] if "episode_success" in traj else torch.empty(0)
            self.extend(zip(ret[done].tolist(), traj["episode_length"][1:][done].tolist()),
                        success[~torch.isnan(success)].tolist())

    def pop_metrics(self) -> Dict[str, float]:
        """The means since the last call: ``episode_return``, ``episode_length``, ``episodes`` (the count so
        far), and ``episode_success`` where ended episodes reported one."""
        if not self.pending:
            return {}
        r, n = zip(*self.pending)
        self.pending = []
        out = {"episode_return": float(np.mean(r)), "episode_length": float(np.mean(n)), "episodes": self.count}
        if self.pending_success:
            out["episode_success"] = float(np.mean(self.pending_success))
            self.pending_success = []
        return out

    def recent(self) -> Optional[float]:
        return float(np.mean(self.window)) if self.window else None


class RunSession:
    """The bookkeeping of one run. A subclass builds its network (``self.net``) and learner
    (``self.learner``: ``updates``, ``state_dict``, ``load_state_dict``), names the torch generators it
    checkpoints (``self.generators``), then calls ``RunSession.__init__``, which restores a checkpoint
    (weights, learner, counters, RNG states) and opens the logger and the progress bar.

    Subclasses fill in :meth:`checkpoint_extra`, :meth:`summary_fields` and :meth:`curve_title`, and may
    override :meth:`at_end` (work between the final checkpoint and closing the logger) and :meth:`close`.
    """

    net: torch.nn.Module
    learner: object
    generators: Sequence[torch.Generator] = ()

    def __init__(self, cfg: Config, ckpt: Optional[dict], counters: Sequence[str], *, tags: Sequence[str],
                 time_limit_s: Optional[float] = None, progress_bar: Optional[bool] = None,
                 progress_interval_s: Optional[float] = None):
        self.cfg = cfg
        self.run_dir = run_dir_of(cfg)
        self.counters = {k: 0 for k in counters}
        self.resumed = ckpt is not None
        if ckpt is not None:
            self.restore(ckpt)
        self.frames_per_step = frames_per_step(cfg)
        self.time_limit_s = time_limit_s
        self.stop_requested = False
        self.status = "running"
        st = cfg.stop
        self.stop = SuccessStop(st.success, st.window_episodes, st.hold_steps)
        self.episodes = RecentEpisodes(stop=self.stop)
        self.episodes.count = self.counters.get("episodes", 0)
        self._events = os.path.join(self.run_dir, "events.log")
        logger_cfg = dataclasses.replace(cfg.logger, wandb_tags=list(cfg.logger.wandb_tags) + list(tags))
        self.logger = RunLogger(self.run_dir, logger_cfg, config_to_dict(cfg), cfg.name,
                                resume_step=self.counters["step"] if self.resumed else None,
                                frames_per_step=self.frames_per_step)
        show = cfg.logger.progress_bar if progress_bar is None else progress_bar
        self.bar = progress(cfg.total_steps, initial=self.counters["step"], enabled=show,
                            interval_s=progress_interval_s, frames_per_step=self.frames_per_step)
        self.start_time = time.time()
        self.start_step = self.counters["step"]
        every = cfg.eval.interval_steps
        self._next_eval = (self.counters["step"] // every + 1) * every if every > 0 else None
        self.last_eval: Optional[Dict] = None  # the latest evaluation during training
        self.final_eval: Optional[Dict] = None  # eval.at_end's

    # ------------------------------------------------------------------ checkpoints
    def restore(self, ckpt: dict) -> None:
        """Weights, learner state, counters and RNG states from a checkpoint."""
        self.net.load_state_dict(ckpt["model"])
        self.learner.load_state_dict(ckpt["extra"]["learner"])
        self.counters.update({k: int(v) for k, v in ckpt["counters"].items() if k in self.counters})
        restore_rng_state(ckpt["rng"], list(self.generators) or None)

    def checkpoint_extra(self) -> Dict:
        """What the algorithm adds to a checkpoint (beside weights, counters, RNG states and config)."""
        return {"learner": self.learner.state_dict()}

    def checkpoint(self) -> str:
        if "updates" in self.counters:
            self.counters["updates"] = self.learner.updates
        if "episodes" in self.counters:
            self.counters["episodes"] = self.episodes.count
        return save_run_checkpoint(
            self.run_dir, self.counters["step"], keep=self.cfg.checkpoint.keep, model_state=self.net.state_dict(),
            optimizer_state=None, counters=self.counters, rng_state=capture_rng_state(list(self.generators) or None),
            config=config_to_dict(self.cfg), extra=self.checkpoint_extra())

    # ------------------------------------------------------------------ during the run
    def event(self, msg: str) -> None:
        """A line for the console and ``<run_dir>/events.log`` (failures, rejections, restarts)."""
        self.bar.write(msg)
        try:
            with open(self._events, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} step={self.counters['step']} {msg}\n")
        except OSError:
            pass

    def done(self) -> bool:
        """The budget is spent, a stop was requested, the success to stop at was reached (``stop``), or the
        time limit is up."""
        if self.stop_requested or self.counters["step"] >= self.cfg.total_steps or self._solved():
            return True
        return self.time_limit_s is not None and time.time() - self.start_time >= self.time_limit_s

    def _solved(self) -> bool:
        first = self.stop.reached_step is None
        due = self.stop.due(self.counters["step"])
        if first and self.stop.reached_step is not None:
            after = f"; training on for {self.stop.hold_steps} steps" if self.stop.hold_steps else ""
            self.event(f"stop.success {self.stop.threshold:g} reached: mean {self.stop.reached_mean:.3f} over the "
                       f"last {self.stop.returns.maxlen} episodes{after}")
        return due

    def end_status(self) -> str:
        """Why a loop that returned normally ended (a loop may have set ``self.status`` itself)."""
        if self.status != "running":
            return self.status
        if self.stop_requested:
            return "interrupted"
        if self.counters["step"] >= self.cfg.total_steps:
            return "finished"
        return "stopped: solved" if self.stop.due(self.counters["step"]) else "stopped: time limit"

    def run(self, loop: Callable[[], None], summary_extra: Optional[Callable[[], Dict]] = None, *,
            signals: bool = False) -> Dict:
        """Run the training ``loop`` and finish the run with the status that says why it ended: the loop's
        end (:meth:`end_status`), or the exception that ended it (:func:`stop_status`; it is re-raised
        after the final checkpoint and summary). ``summary_extra()`` adds fields to the summary.

        With ``signals`` (a run in the main thread of its own process: the local runtime, PPO), SIGINT and
        SIGTERM (Ctrl-C, ``timeout``, ``kill``, a batch scheduler's stop) end the run cleanly: the first
        one sets :attr:`stop_requested`, so the loop ends after the update in progress, the final
        checkpoint and summary (``status: interrupted``) are written, and ``KeyboardInterrupt`` is raised
        after them (``r2ac train`` exits 130). A second one during the loop stops it at once (still with a
        final checkpoint of what was applied); one while the checkpoint is written is ignored. Signals
        that already have a handler other than the default keep it."""
        status = "running"
        with _stop_on_signals(self) if signals else contextlib.nullcontext() as caught:
            try:
                loop()
                status = self.end_status()
            except BaseException as e:
                status = stop_status(e)
                raise
            finally:
                if caught is not None:
                    caught.append("finishing")
                summary = self.finish(status, summary_extra)
        if caught and caught[0] != "finishing":
            raise KeyboardInterrupt(f"stopped by {caught[0]}")
        return summary

    # ------------------------------------------------------------------ evaluation
    def eval_policy(self, seed: int):
        """The current weights as a CPU policy (an :class:`r2ac.api.Policy`) that :meth:`evaluate` plays."""
        raise NotImplementedError

    def maybe_evaluate(self) -> None:
        """The periodic evaluation (``eval.interval_steps``), when its step has come."""
        if self._next_eval is not None and self.counters["step"] >= self._next_eval:
            every = self.cfg.eval.interval_steps
            self._next_eval = (self.counters["step"] // every + 1) * every
            self.evaluate(sets=1, episodes=self.cfg.eval.interval_episodes)

    def evaluate(self, sets: int, episodes: int) -> Optional[Dict]:
        """Test episodes of the current weights on fresh envs (``eval.greedy``; ``eval.video`` records one):
        a row of ``eval.csv``, ``eval/`` metrics on TensorBoard/W&B. A failure is reported, never fatal."""
        from r2ac.evaluation import append_eval_csv, eval_metrics, evaluate_policy

        step = self.counters["step"]
        ev = self.cfg.eval
        seed = self.cfg.seed * 1000 + 555
        try:
            policy = self.eval_policy(seed)
            video = (os.path.join(self.run_dir, "videos", f"eval_step{step}_{'greedy' if ev.greedy else 'sampled'}.gif")
                     if ev.video else None)
            result = evaluate_policy(policy, self.cfg, sets=sets, episodes=episodes, seed=seed, greedy=ev.greedy,
                                     video=video)
        except Exception as e:
            self.event(f"evaluation at step {step} failed ({type(e).__name__}: {e}); training goes on")
            return None
        result.update(step=step, env_frames=step * self.frames_per_step, checkpoint="(training)")
        append_eval_csv(self.run_dir, result)
        media = {}
        if result.get("video") and self.logger.wandb_run is not None:
            try:
                import wandb

                media["eval/video"] = wandb.Video(result["video"], format="gif")
            except Exception:
                pass
        self.logger.log_dashboards(step, eval_metrics(result), media)
        self.bar.write(f"eval at step {step:,}: return {result['mean']:.3f} over {sets * episodes} episodes "
                       f"({result['mode']} actions)")
        self.last_eval = result
        return result

    # ------------------------------------------------------------------ the end
    def at_end(self, status: str) -> None:
        """Called after the final checkpoint, before the logger closes: the final evaluation (``eval.at_end``)
        of a run that finished or ran out of time."""
        ev = self.cfg.eval
        if ev.at_end and ev.sets > 0 and status in ("finished", "stopped: time limit", "stopped: solved"):
            self.final_eval = self.evaluate(sets=ev.sets, episodes=ev.episodes)

    def close(self) -> None:
        self.bar.close()
        self.logger.close()

    def curve_title(self) -> str:
        return f"{self.cfg.name}: {self.cfg.env.id}, {self.cfg.model.core}/{self.cfg.model.learning}"

    def summary_fields(self, elapsed: float) -> Dict:
        """The algorithm's fields of the summary (beside run_dir, status, step, updates, episodes,
        recent_return, steps_per_s)."""
        return {}

    def finish(self, status: str, summary_extra: Optional[Callable[[], Dict]] = None) -> Dict:
        """Final checkpoint, close the logger, plot the learning curve; returns (and writes) the summary,
        also when the final checkpoint fails (its error is raised after the summary is written)."""
        self.status = status
        try:
            self.checkpoint()
            self.at_end(status)
        finally:
            try:
                self.close()
            finally:
                summary = self._write_summary(status, summary_extra)
        return summary

    def _write_summary(self, status: str, summary_extra: Optional[Callable[[], Dict]]) -> Dict:
        metrics_csv = os.path.join(self.run_dir, "metrics.csv")
        if os.path.exists(metrics_csv):
            try:
                plot_learning_curve(metrics_csv, os.path.join(self.run_dir, "learning_curve.png"), smooth=0.6,
                                    title=self.curve_title())
            except Exception as e:  # a plot must never lose a run
                print(f"warning: could not plot the learning curve: {e}")
        elapsed = max(time.time() - self.start_time, 1e-9)
        recent = self.episodes.recent()
        summary = {"run_dir": self.run_dir, "status": status, "step": self.counters["step"],
                   "updates": self.learner.updates, "episodes": self.episodes.count,
                   "recent_return": recent if recent is not None and math.isfinite(recent) else None,
                   "steps_per_s": (self.counters["step"] - self.start_step) / elapsed,
                   **self.summary_fields(elapsed)}
        if self.stop.reached_step is not None:
            summary["stop_reached"] = {"step": self.stop.reached_step, "mean": self.stop.reached_mean}
        if self.final_eval is not None:
            summary["eval"] = {k: self.final_eval[k] for k in ("sets", "episodes", "mode", "mean", "std")}
        if summary_extra is not None:
            summary.update(summary_extra())
        with open(os.path.join(self.run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        return summary
