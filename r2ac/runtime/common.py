"""What both runtimes share: run-directory setup and resume, building envs and the network, the learner
side of a run (validation, batching, updates, counters, the logging row, checkpoints, the summary) and
env recreation after a failure.

The local runtime (``r2ac.runtime.local``) and the Ray runtime (``r2ac.runtime.ray_runtime``) differ
only in how trajectories reach :class:`TrainingSession` and how its weights reach the actors.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import json
import os
import time
import warnings
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

from r2ac.agent.a2c import A2CLearner
from r2ac.agent.learner import Learner
from r2ac.agent.nets import AgentNet
from r2ac.agent.stem_io import StemFileError, load_pretrained_stem
from r2ac.agent.trajectory import Batcher, nbytes, validate
from r2ac.checkpoint import capture_rng_state, load_latest_checkpoint, restore_rng_state, save_run_checkpoint
from r2ac.config import Config, ConfigError, config_to_dict, save_config
from r2ac.envs import make_vec_env, parse_env_id
from r2ac.logger import RunLogger, plot_learning_curve, progress

# Counters every run keeps (checkpointed; restored on resume).
COUNTERS = ("step", "updates", "episodes", "trajectories", "rejected_trajectories", "env_failures",
            "actor_failures", "lost_rollouts")
# Emulator frames per agent step where the env repeats actions (used for env_frames_per_s).
_FRAMES_PER_STEP = {"atari": 4, "dmlab": 4}


class RunAborted(RuntimeError):
    """The run cannot go on (e.g. every rollout fails, or the learner process died); its last
    checkpoint is kept and ``r2ac train --resume RUN_DIR`` continues it once the cause is fixed."""


def set_fast_math(torch_threads: int = 1) -> None:
    """Flush denormal floats to zero on CPU: RTRL sensitivities and gate products decay geometrically,
    and denormal arithmetic made CPU training 2-6x slower (measured). Set the intra-op thread count
    (``runtime.torch_threads``): with the small per-step work of actors, OpenMP threads that spin while
    other processes share the cores made a 2-core run 15x slower with 2 threads than with 1 (measured)."""
    torch.set_flush_denormal(True)
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


def make_env(cfg: Config, index: int):
    return make_vec_env(cfg.env.id, cfg.env.num_envs, cfg.seed * 1000 + index, **dict(cfg.env.options))


def build_net(cfg: Config, observation_shape, num_actions, load_stem: bool = True) -> AgentNet:
    """The agent network of a config. With ``stem.path`` the pretrained stem is loaded (after checking that
    it fits the observation shape and architecture); with ``stem.freeze`` it is frozen and kept out of the
    optimizer. Actors and evaluation pass ``load_stem=False``: their weights (stem included) come from the
    learner or the checkpoint, so the stem file need not exist on their machines."""
    if not num_actions or int(num_actions) < 1:
        raise ConfigError(f"env {cfg.env.id!r} has continuous actions, but algo=impala (V-trace with a categorical "
                          "policy) needs discrete ones; use algo=ppo for continuous control")
    net = AgentNet.from_config(cfg.model, observation_shape, num_actions, reward_clip=cfg.learner.reward_clip)
    if cfg.stem.path and load_stem:
        try:
            load_pretrained_stem(net.stem, cfg.stem.path)
        except StemFileError as e:
            raise ConfigError(str(e)) from e
    if cfg.stem.freeze:
        net.freeze_stem()
    return net


def frames_per_step(cfg: Config) -> int:
    """Emulator frames per agent step (the action repeat): 4 for Atari/DMLab unless configured, else 1."""
    kind = parse_env_id(cfg.env.id)[0]
    opts = dict(cfg.env.options)
    return int(opts.get("frame_skip", opts.get("action_repeat", _FRAMES_PER_STEP.get(kind, 1))))


def recreate_envs(cfg: Config, actor, index: int, failures: int) -> None:
    """After an env raised: close the actor's envs, build new ones (a fresh seed) and restart the actor
    (new episodes, fresh core state). The partial trajectory is dropped (counted in ``actor.dropped``)."""
    try:
        actor.venv.close()
    except Exception:  # a broken env may fail to close too; it is replaced either way
        pass
    actor.venv = make_env(cfg, index + 100 * failures)
    actor.restart()
    actor.dropped += 1


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


def continue_lr_schedule(learner, cfg: Config, ckpt: dict) -> Optional[str]:
    """On resume: keep the linear learning-rate schedule continuous. The learner computes
    ``lr = learning_rate * (1 - steps / total_steps)``; a resume with another ``total_steps`` would make the
    rate jump (up, for a larger budget). Instead the rate goes on from its value at the checkpoint and
    decays linearly to 0 at the new ``total_steps`` (a schedule that had already reached 0 restarts from
    ``learning_rate``, stretched over the new budget). A changed ``learner.learning_rate`` is taken as
    asked. Returns a line for the event log when the schedule was re-anchored."""
    if cfg.learner.lr_schedule != "linear":
        return None
    old_cfg = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else {}
    old_lr = float(old_cfg.get("learner", {}).get("learning_rate", cfg.learner.learning_rate))
    sched = (ckpt.get("extra") or {}).get("lr_schedule") or {
        "learning_rate": old_lr, "total_steps": int(old_cfg.get("total_steps", cfg.total_steps))}
    if cfg.learner.learning_rate != old_lr:
        return f"learner.learning_rate changed to {cfg.learner.learning_rate:g}: the schedule starts from it"
    lr0, total = float(sched["learning_rate"]), int(sched["total_steps"])
    steps = learner.steps
    if total != cfg.total_steps and steps < cfg.total_steps:
        now = lr0 * max(0.0, 1.0 - steps / total)
        if now > 0:
            lr0, total = now * cfg.total_steps / (cfg.total_steps - steps), cfg.total_steps
            note = (f"total_steps {int(sched['total_steps']):,} -> {cfg.total_steps:,}: the learning rate goes on "
                    f"from {now:.3g} and decays to 0 at step {cfg.total_steps:,}")
        else:
            lr0, total = cfg.learner.learning_rate, cfg.total_steps
            note = (f"total_steps -> {cfg.total_steps:,}: the learning-rate schedule had reached 0; it restarts "
                    f"at {lr0 * (1 - steps / total):.3g} and decays to 0 at step {total:,}")
    else:
        note = None
    learner.cfg = dataclasses.replace(learner.cfg, learning_rate=lr0)
    learner.total_steps = total
    return note


def start_run(cfg: Config, resume: bool) -> Optional[dict]:
    """Check and create the run directory, save its config, seed the RNGs; returns the checkpoint to
    resume from (``None`` for a fresh run)."""
    run_dir = run_dir_of(cfg)
    ckpt = checkpoint_to_resume(run_dir, resume)
    os.makedirs(run_dir, exist_ok=True)
    save_config(cfg, os.path.join(run_dir, "config.yaml"))
    set_fast_math(cfg.runtime.torch_threads)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    return ckpt


class RecentEpisodes:
    """Episode returns/lengths finished since the last log row, plus a longer window for the bar."""

    def __init__(self, window: int = 100):
        self.pending: List[tuple] = []
        self.window = collections.deque(maxlen=window)
        self.count = 0

    def add(self, traj: Dict) -> None:
        ret = traj["episode_return"][1:]
        done = ~torch.isnan(ret)
        if done.any():
            for r, n in zip(ret[done].tolist(), traj["episode_length"][1:][done].tolist()):
                self.pending.append((r, n))
                self.window.append(r)
            self.count += int(done.sum())

    def pop_metrics(self) -> Dict[str, float]:
        if not self.pending:
            return {}
        r, n = zip(*self.pending)
        self.pending = []
        return {"episode_return": float(np.mean(r)), "episode_length": float(np.mean(n)), "episodes": self.count}

    def recent(self) -> Optional[float]:
        return float(np.mean(self.window)) if self.window else None


class TrainingSession:
    """The learner side of one run, whatever moves the data: network, ``Learner``, ``Batcher``,
    counters, logger, progress bar, checkpoints and the summary.

    A runtime feeds it trajectories (:meth:`add_trajectory`), reports env failures and lost rollouts,
    calls :meth:`tick` regularly (log rows, checkpoints) and :meth:`finish` at the end.
    ``publish(version)`` is called after every applied update so the runtime can hand the new weights
    to its actors.
    """

    def __init__(self, cfg: Config, ckpt: Optional[dict], observation_shape, num_actions: int, *,
                 publish: Optional[Callable[[int], None]] = None, time_limit_s: Optional[float] = None,
                 progress_bar: Optional[bool] = None):
        self.cfg = cfg
        self.run_dir = run_dir_of(cfg)
        self.M = cfg.learner.unroll_length
        self.obs_shape, self.num_actions = tuple(observation_shape), int(num_actions)
        self.device = resolve_device(cfg.device)
        self.net = build_net(cfg, self.obs_shape, self.num_actions).to(self.device)
        learner_cls = A2CLearner if cfg.algo == "a2c" else Learner
        self.learner = learner_cls(self.net, cfg.learner, cfg.total_steps, self.device)
        self.counters = {k: 0 for k in COUNTERS}
        self.resumed = ckpt is not None
        lr_note = None
        if ckpt is not None:
            self.net.load_state_dict(ckpt["model"])
            self.learner.load_state_dict(ckpt["extra"]["learner"])
            self.counters.update({k: int(v) for k, v in ckpt["counters"].items() if k in self.counters})
            restore_rng_state(ckpt["rng"])
            lr_note = continue_lr_schedule(self.learner, cfg, ckpt)
        self.state_spec = self.net.core.state_spec()
        self.frames_per_step = frames_per_step(cfg)
        self.batcher = Batcher(cfg.learner.batch_size)
        self.publish = publish or (lambda version: None)
        self.time_limit_s = time_limit_s
        self.stop_requested = False
        tags = list(cfg.logger.wandb_tags) + [f"learning:{cfg.model.learning}", f"M:{self.M}",
                                              f"runtime:{cfg.runtime.kind}", f"core:{cfg.model.core}"]
        self.logger = RunLogger(self.run_dir, dataclasses.replace(cfg.logger, wandb_tags=tags),
                                config_to_dict(cfg), cfg.name,
                                resume_step=self.counters["step"] if self.resumed else None,
                                frames_per_step=self.frames_per_step)
        self.episodes = RecentEpisodes()
        self.episodes.count = self.counters["episodes"]
        show = cfg.logger.progress_bar if progress_bar is None else progress_bar
        self.bar = progress(cfg.total_steps, initial=self.counters["step"], enabled=show,
                            interval_s=cfg.logger.log_interval_s, frames_per_step=self.frames_per_step)
        self.stats: Dict[str, float] = {}  # the last update's statistics
        self._stat_sums: Dict[str, List[float]] = {}  # key -> [sum, count] since the last log row
        self.status = "running"
        self.failures_in_row = 0
        self.start_time = self.last_log_time = self._t_ckpt = time.time()
        self.start_step = self.counters["step"]
        self._mark = self._marks()
        self._lags: List[tuple] = []
        self._bytes: List[int] = []
        self._events = os.path.join(self.run_dir, "events.log")
        self.learner_busy_s = 0.0  # time in updates and weight publication since the last row
        every = cfg.eval.interval_steps
        self._next_eval = (self.counters["step"] // every + 1) * every if every > 0 else None
        self.last_eval: Optional[Dict] = None
        if lr_note:
            self.event(lr_note)

    # ------------------------------------------------------------------ data in
    def event(self, msg: str) -> None:
        """A line for the console and ``<run_dir>/events.log`` (failures, rejections, restarts)."""
        self.bar.write(msg)
        try:
            with open(self._events, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} step={self.counters['step']} {msg}\n")
        except OSError:
            pass

    def add_trajectory(self, traj: Dict, steps: int, source: str = "actor") -> bool:
        """Count the ``steps`` agent steps a trajectory from ``source`` took; validate it and train on it if
        it is well-formed. A malformed one is rejected with a logged reason and never trained on; the
        caller should then restart that actor (a NaN in its recurrent state would otherwise stay there:
        episode resets multiply the state by 0). Returns whether the trajectory was accepted."""
        self.counters["step"] += int(steps)
        self._bytes.append(nbytes(traj))
        reason = validate(traj, unroll_length=self.M, num_actions=self.num_actions, state_spec=self.state_spec,
                          obs_shape=self.obs_shape)
        if reason is not None:
            self.counters["rejected_trajectories"] += 1
            self.event(f"rejected a trajectory from {source}: {reason}; the actor starts over")
            return False
        self.failures_in_row = 0
        self.counters["trajectories"] += 1
        self.episodes.add(traj)
        for batch in self.batcher.add(traj):
            t0 = time.perf_counter()
            self.stats = self.learner.update(batch)
            for k, v in self.stats.items():
                acc = self._stat_sums.setdefault(k, [0.0, 0])
                acc[0] += v
                acc[1] += 1
            if "policy_lag_mean" in self.stats:  # applied (a skipped non-finite update has no lag)
                self._lags.append((self.stats["policy_lag_mean"], self.stats["policy_lag_max"]))
                self.publish(self.learner.updates)
            self.learner_busy_s += time.perf_counter() - t0
        return True

    def env_failure(self, source: str, error: str, steps: int = 0) -> None:
        """An env raised in ``source``: its envs were recreated and the partial trajectory dropped."""
        self.counters["env_failures"] += 1
        self.counters["step"] += steps
        self.event(f"env failure in {source} ({error}); recreated its envs, dropped the partial trajectory")
        self._check_failures(error)

    def rollout_lost(self, source: str, error: str, actor_failed: bool) -> None:
        """A rollout never came back (its actor process died or became unreachable); ``actor_failed``
        marks the first lost rollout of such an outage."""
        self.counters["lost_rollouts"] += 1
        if actor_failed:
            self.counters["actor_failures"] += 1
            self.event(f"{source} failed ({error}); Ray restarts it, training goes on")

    def _check_failures(self, error: str) -> None:
        self.failures_in_row += 1
        limit = max(20, 5 * self.cfg.runtime.num_actors)
        if self.failures_in_row > limit:
            raise RunAborted(f"{self.failures_in_row} rollouts in a row failed without one good trajectory "
                             f"(last: {error}); stopping with the last checkpoint kept")

    # ------------------------------------------------------------------ time
    def done(self) -> bool:
        if self.stop_requested or self.counters["step"] >= self.cfg.total_steps:
            return True
        return self.time_limit_s is not None and time.time() - self.start_time >= self.time_limit_s

    def _marks(self) -> tuple:
        return self.counters["step"], self.learner.steps, self.learner.updates

    def row(self, now: float, extra: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """The metrics row since the previous one (both runtimes log the same keys; ``extra`` adds
        runtime-specific ones)."""
        dt = max(now - self.last_log_time, 1e-9)
        step, lsteps, updates = self._marks()
        step0, lsteps0, updates0 = self._mark
        # learner statistics: means over the updates since the previous row (the last ones if none)
        means = {k: total / n for k, (total, n) in self._stat_sums.items()} or self.stats
        self._stat_sums = {}
        row = {**means, **self.episodes.pop_metrics(), "updates": updates,
               "steps_per_s": (step - step0) / dt,
               "env_frames_per_s": (step - step0) * self.frames_per_step / dt,
               "learner_steps_per_s": (lsteps - lsteps0) / dt,
               "learner_updates_per_s": (updates - updates0) / dt,
               "learner_busy_frac": self.learner_busy_s / dt,
               "rejected_trajectories": self.counters["rejected_trajectories"],
               "env_failures": self.counters["env_failures"],
               "skipped_updates": self.learner.skipped,
               "unroll_length": self.M, "rtrl": float(self.cfg.model.learning == "rtrl")}
        if self._lags:
            row["policy_lag_mean"] = float(np.mean([m for m, _ in self._lags]))
            row["policy_lag_max"] = float(max(x for _, x in self._lags))
        if self._bytes:
            row["bytes_per_trajectory"] = float(np.mean(self._bytes))
        row.update(extra or {})
        self._lags, self._bytes, self.learner_busy_s = [], [], 0.0
        self._mark = (step, lsteps, updates)
        return row

    def tick(self, extra: Optional[Callable[[], Dict[str, float]]] = None) -> None:
        """Update the bar; log a row every ``logger.log_interval_s`` (``extra()`` adds runtime-specific
        metrics to it); checkpoint every ``checkpoint.interval_s``."""
        self.bar.update(self.counters["step"], self.episodes.recent())
        now = time.time()
        if now - self.last_log_time >= self.cfg.logger.log_interval_s or self.done():
            self.logger.log(self.counters["step"], self.row(now, extra() if extra else None))
            self.last_log_time = now
        if now - self._t_ckpt >= self.cfg.checkpoint.interval_s:
            self.checkpoint()
            self._t_ckpt = now
        if self._next_eval is not None and self.counters["step"] >= self._next_eval:
            every = self.cfg.eval.interval_steps
            self._next_eval = (self.counters["step"] // every + 1) * every
            self.evaluate(sets=1, episodes=self.cfg.eval.interval_episodes)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, sets: int, episodes: int) -> Optional[Dict]:
        """Test episodes of the current weights on fresh envs (``eval.greedy``; ``eval.video`` records one):
        a row of ``eval.csv``, ``eval/`` metrics on TensorBoard/W&B. A failure is reported, never fatal."""
        from r2ac.api import Policy
        from r2ac.evaluation import append_eval_csv, eval_metrics, evaluate_policy

        step = self.counters["step"]
        try:
            net = copy.deepcopy(self.net).cpu()
            net.observation_shape = self.obs_shape
            ev = self.cfg.eval
            policy = Policy(net, self.cfg, step=step, greedy=ev.greedy, seed=self.cfg.seed * 1000 + 555)
            video = (os.path.join(self.run_dir, "videos", f"eval_step{step}_{'greedy' if ev.greedy else 'sampled'}.gif")
                     if ev.video else None)
            result = evaluate_policy(policy, self.cfg, sets=sets, episodes=episodes, seed=self.cfg.seed * 1000 + 555,
                                     greedy=ev.greedy, video=video)
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

    # ------------------------------------------------------------------ persistence
    def checkpoint(self) -> str:
        self.counters["updates"], self.counters["episodes"] = self.learner.updates, self.episodes.count
        return save_run_checkpoint(
            self.run_dir, self.counters["step"], keep=self.cfg.checkpoint.keep, model_state=self.net.state_dict(),
            optimizer_state=None, counters=self.counters, rng_state=capture_rng_state(),
            config=config_to_dict(self.cfg), extra={"learner": self.learner.state_dict(), "lr_schedule": {
                "learning_rate": float(self.learner.cfg.learning_rate), "total_steps": int(self.learner.total_steps)}})

    def weights(self) -> Dict[str, torch.Tensor]:
        """The current weights on the CPU, detached (what actors load)."""
        return {k: v.detach().cpu() for k, v in self.net.state_dict().items()}

    def finish(self, status: str) -> Dict:
        """Final checkpoint, close the logger, plot the learning curve; returns (and writes) the summary."""
        self.status = status
        final_eval = None
        try:
            self.checkpoint()
            ev = self.cfg.eval
            if ev.at_end and ev.sets > 0 and status in ("finished", "stopped: time limit"):
                final_eval = self.evaluate(sets=ev.sets, episodes=ev.episodes)
        finally:
            self.bar.close()
            self.logger.close()
        metrics_csv = os.path.join(self.run_dir, "metrics.csv")
        if os.path.exists(metrics_csv):
            try:
                plot_learning_curve(metrics_csv, os.path.join(self.run_dir, "learning_curve.png"), smooth=0.6,
                                    title=f"{self.cfg.name}: {self.cfg.env.id}, {self.cfg.model.core}/"
                                          f"{self.cfg.model.learning}, M={self.M}")
            except Exception as e:  # a plot must never lose a run
                print(f"warning: could not plot the learning curve: {e}")
        elapsed = max(time.time() - self.start_time, 1e-9)
        summary = {"run_dir": self.run_dir, "status": status, "step": self.counters["step"],
                   "updates": self.learner.updates, "episodes": self.episodes.count,
                   "recent_return": self.episodes.recent(),
                   "steps_per_s": (self.counters["step"] - self.start_step) / elapsed,
                   "trajectories": self.counters["trajectories"],
                   "rejected_trajectories": self.counters["rejected_trajectories"],
                   "env_failures": self.counters["env_failures"], "skipped_updates": self.learner.skipped,
                   "actor_failures": self.counters["actor_failures"], "lost_rollouts": self.counters["lost_rollouts"]}
        if final_eval is not None:
            summary["eval"] = {k: final_eval[k] for k in ("sets", "episodes", "mode", "mean", "std")}
        with open(os.path.join(self.run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        return summary
