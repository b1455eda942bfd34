"""What the local and the Ray runtime share on the learner side of an IMPALA/A2C run: building envs and
the network, :class:`TrainingSession` (validation, batching, updates, the logging row, evaluation; the run
directory, logger, checkpoints and summary come from :class:`r2ac.runtime.session.RunSession`), the
learning-rate schedule on resume and env recreation after a failure.

The local runtime (``r2ac.runtime.local``) and the Ray runtime (``r2ac.runtime.ray_runtime``) differ
only in how trajectories reach :class:`TrainingSession` and how its weights reach the actors.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

from r2ac.agent.a2c import A2CLearner
from r2ac.agent.learner import Learner
from r2ac.agent.nets import AgentNet
from r2ac.agent.stem_io import StemFileError, load_pretrained_stem
from r2ac.agent.trajectory import Batcher, nbytes, num_columns, validate
from r2ac.config import Config, ConfigError
from r2ac.envs import make_config_env, needs_prev_action
from r2ac.logger import RunLogger
from r2ac.runtime.session import RunAborted, RunSession, env_seed, resolve_device

# Counters every run keeps (checkpointed; restored on resume).
COUNTERS = ("step", "updates", "episodes", "trajectories", "rejected_trajectories", "env_failures",
            "actor_failures", "lost_rollouts")


def make_env(cfg: Config, index: int):
    """The envs of actor ``index`` (seeded by :func:`r2ac.runtime.session.env_seed`)."""
    return make_config_env(cfg.env, cfg.env.num_envs, env_seed(cfg, index))


def resolve_model(cfg: Config):
    """``cfg.model`` with what depends on the env resolved: ``prev_action_input: auto`` becomes whether the
    task declares that its observation needs the previous action (:func:`r2ac.envs.needs_prev_action`). The
    rest of ``auto`` depends on the observation only and is resolved by the network."""
    m = cfg.model
    if m.prev_action_input == "auto":
        m = dataclasses.replace(m, prev_action_input=needs_prev_action(cfg.env.id))
    return m


#: the model keys whose ``auto`` is resolved per task (by ``resolve_model`` or the network), each read back
#: from the ``AgentNet`` attribute of the same name
AUTO_MODEL_KEYS = ("prev_action_input", "input_scale", "episode_start_value", "frame_pool", "centre_frames",
                   "running_centres", "frame_extremes", "frame_centroids")


def resolved_autos(cfg: Config, net: AgentNet) -> Dict[str, object]:
    """model key -> what it became in ``net``, for each key of ``AUTO_MODEL_KEYS`` that ``cfg.model`` leaves to
    ``auto`` (or ``auto_pixels``); a run's ``config.yaml`` keeps ``auto`` as given."""
    out: Dict[str, object] = {}
    for key in AUTO_MODEL_KEYS:
        given = getattr(cfg.model, key)
        if isinstance(given, str) and given.startswith("auto"):
            value = getattr(net, key)
            out[key] = value if isinstance(value, (bool, int)) else float(value)
    return out


def autos_line(resolved: Dict[str, object]) -> str:
    """One line naming what each ``auto`` became (``''`` if none): ``model auto: prev_action_input=true, ...``."""
    if not resolved:
        return ""
    def show(v):
        return str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)
    return "model auto: " + ", ".join(f"{k}={show(v)}" for k, v in resolved.items())


def build_net(cfg: Config, observation_shape, num_actions, load_stem: bool = True) -> AgentNet:
    """The agent network of a config. With ``stem.path`` the pretrained stem is loaded (after checking that
    it fits the observation shape and architecture); with ``stem.freeze`` it is frozen and kept out of the
    optimizer. Actors and evaluation pass ``load_stem=False``: their weights (stem included) come from the
    learner or the checkpoint, so the stem file need not exist on their machines."""
    if not num_actions or int(num_actions) < 1:
        raise ConfigError(f"env {cfg.env.id!r} has continuous actions, but algo=impala (V-trace with a categorical "
                          "policy) needs discrete ones; use algo=ppo for continuous control")
    net = AgentNet.from_config(resolve_model(cfg), observation_shape, num_actions,
                               reward_clip=cfg.learner.reward_clip)
    if cfg.stem.path and load_stem:
        try:
            load_pretrained_stem(net.stem, cfg.stem.path)
        except StemFileError as e:
            raise ConfigError(str(e)) from e
    if cfg.stem.freeze:
        net.freeze_stem()
    if cfg.model.freeze_core:
        net.freeze_core()
    return net


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


class TrainingSession(RunSession):
    """The learner side of one IMPALA/A2C run, whatever moves the data: network, ``Learner``, ``Batcher``,
    the logging row and evaluation, on top of :class:`RunSession` (run directory, counters, logger,
    progress bar, checkpoints, the summary).

    A runtime feeds it trajectories (:meth:`add_trajectory`), reports env failures and lost rollouts,
    calls :meth:`tick` regularly (log rows, checkpoints) and runs its loop in :meth:`run` (or calls
    :meth:`finish` at the end). ``publish(version)`` is called after every applied update so the runtime
    can hand the new weights to its actors.
    """

    def __init__(self, cfg: Config, ckpt: Optional[dict], observation_shape, num_actions: int, *,
                 publish: Optional[Callable[[int], None]] = None, time_limit_s: Optional[float] = None,
                 progress_bar: Optional[bool] = None, device: Optional[torch.device] = None):
        self.M = cfg.learner.unroll_length
        self.obs_shape, self.num_actions = tuple(observation_shape), int(num_actions)
        self.device = device if device is not None else resolve_device(cfg.device)
        self.net = build_net(cfg, self.obs_shape, self.num_actions).to(self.device)
        learner_cls = A2CLearner if cfg.algo == "a2c" else Learner
        self.learner = learner_cls(self.net, cfg.learner, cfg.total_steps, self.device)
        tags = [f"learning:{cfg.model.learning}", f"M:{self.M}", f"runtime:{cfg.runtime.kind}",
                f"core:{cfg.model.core}"]
        super().__init__(cfg, ckpt, COUNTERS, tags=tags, time_limit_s=time_limit_s, progress_bar=progress_bar,
                         progress_interval_s=cfg.logger.log_interval_s)
        lr_note = continue_lr_schedule(self.learner, cfg, ckpt) if ckpt is not None else None
        self.state_spec = self.net.core.state_spec()
        self.batcher = Batcher(cfg.learner.batch_size)
        # learner.sensitivities=learner: slot -> (trajectory number, sensitivities at its end), the learner's
        # own; slots number (source, column) pairs
        learner_sens = cfg.learner.sensitivities == "learner" and bool(self.net.core.sensitivity_keys)
        self._carry: Optional[Dict[int, tuple]] = {} if learner_sens else None
        self._slot_base: Dict[str, int] = {}
        self.stats_extra: Dict[str, float] = {}  # statistics of a batch computed before its update
        # sensitivity_rms from validating the trajectories (their square sums), not from a pass of the learner's
        self._sensitivity_keys = tuple(self.net.core.sensitivity_keys)
        self._sensitivity_sq = [0.0, 0]  # sum of squares, entries since the last update
        self.learner.sensitivity_rms = False
        self.publish = publish or (lambda version: None)
        self.stats: Dict[str, float] = {}  # the last update's statistics
        self._stat_sums: Dict[str, List[float]] = {}  # key -> [sum, count] since the last log row
        self.failures_in_row = 0
        self.last_log_time = self._t_ckpt = self.start_time
        self._mark = self._marks()
        self._lags: List[tuple] = []
        self._bytes: List[int] = []
        self.learner_busy_s = 0.0  # time in updates and weight publication since the last row
        # logger.update_log: a row per learner update in <run_dir>/updates.csv
        self.update_logger: Optional[RunLogger] = None
        if cfg.logger.update_log:
            self.learner.detail = True
            self.update_logger = RunLogger(self.run_dir, {"tensorboard": False, "wandb": False}, csv_name="updates.csv",
                                           resume_step=self.counters["step"] if self.resumed else None)
        if lr_note:
            self.event(lr_note)
        self.model_auto = resolved_autos(cfg, self.net)
        if self.model_auto:  # what the task made of the keys left to auto (config.yaml keeps 'auto')
            self.event(autos_line(self.model_auto))

    # ------------------------------------------------------------------ data in
    def add_trajectory(self, traj: Dict, steps: int, source: str = "actor") -> bool:
        """Count the ``steps`` agent steps a trajectory from ``source`` took; validate it and train on it if
        it is well-formed. A malformed one is rejected with a logged reason and never trained on; the
        caller should then restart that actor (a NaN in its recurrent state would otherwise stay there:
        episode resets multiply the state by 0). Returns whether the trajectory was accepted."""
        self.counters["step"] += int(steps)
        self._bytes.append(nbytes(traj))
        square_sums: Dict[str, float] = {}
        reason = validate(traj, unroll_length=self.M, num_actions=self.num_actions, state_spec=self.state_spec,
                          obs_shape=self.obs_shape, square_sums=square_sums)
        if reason is not None:
            self.counters["rejected_trajectories"] += 1
            self.event(f"rejected a trajectory from {source}: {reason}; the actor starts over")
            return False
        self.failures_in_row = 0
        self.counters["trajectories"] += 1
        for k in self._sensitivity_keys:
            self._sensitivity_sq[0] += square_sums[k]
            self._sensitivity_sq[1] += traj["initial_state"][k].numel()
        self.episodes.add(traj)
        carry = self._carry is not None and "segment" in traj
        if carry:
            base = self._slot_base.setdefault(source, len(self._slot_base)) << 20
            traj["slot"] = base + torch.arange(num_columns(traj), dtype=torch.int64)
        for batch in self.batcher.add(traj):
            t0 = time.perf_counter()
            carried = self._use_learner_sensitivities(batch) if carry else None
            self.stats = self.learner.update(batch)
            if carry:
                self._keep_learner_sensitivities(batch)
            if carried is not None:
                self.stats["learner_sensitivities_frac"] = carried
            self.stats.update(self.stats_extra)
            self.stats_extra = {}
            if self._sensitivity_sq[1] and "carry_grad_norm" in self.stats:
                # the RMS of the sensitivities shipped since the last update (those of this batch, and of the
                # columns a previous batch left over)
                self.stats["sensitivity_rms"] = math.sqrt(self._sensitivity_sq[0] / self._sensitivity_sq[1])
                self._sensitivity_sq = [0.0, 0]
            if self.update_logger is not None:
                self.update_logger.log(self.counters["step"], {"update": self.learner.updates,
                                                               "learner_steps": self.learner.steps, **self.stats})
            for k, v in self.stats.items():
                acc = self._stat_sums.setdefault(k, [0.0, 0])
                acc[0] += v
                acc[1] += 1
            if "policy_lag_mean" in self.stats:  # applied (a skipped non-finite update has no lag)
                self._lags.append((self.stats["policy_lag_mean"], self.stats["policy_lag_max"]))
                self.publish(self.learner.updates)
            self.learner_busy_s += time.perf_counter() - t0
        return True

    def _use_learner_sensitivities(self, batch: Dict) -> Optional[float]:
        """``learner.sensitivities=learner``: give each column of ``batch`` that continues a trajectory the
        learner has trained on the sensitivities of that pass instead of the actor's. Returns the fraction
        of continuing columns (no episode start at frame 0) that got them, None if none continue."""
        if "slot" not in batch or "segment" not in batch:
            return None
        keys = self.net.core.sensitivity_keys
        rows, found = [], []
        for j, (slot, seg, start) in enumerate(zip(batch["slot"].tolist(), batch["segment"].tolist(),
                                                   batch["done"][0].tolist())):
            if start:  # the state is reset at frame 0: the starting sensitivities do not matter
                continue
            kept = self._carry.get(slot)
            rows.append(j)
            if kept is not None and kept[0] == seg - 1:
                found.append((j, kept[1]))
        if found:
            st = dict(batch["initial_state"])
            idx = torch.tensor([j for j, _ in found], dtype=torch.int64)
            diff = norm = 0.0
            for k in keys:
                own = torch.stack([sens[k] for _, sens in found]).to(st[k])
                shipped = st[k][idx]
                diff += float((own - shipped).pow(2).sum())
                norm += float(shipped.pow(2).sum())
                st[k] = st[k].index_copy(0, idx, own)
            batch["initial_state"] = st
            # how stale the shipped sensitivities were: |S_learner - S_actor| / |S_actor| over the replaced columns
            self.stats_extra["sensitivity_staleness"] = math.sqrt(diff / norm) if norm > 0 else 0.0
        return len(found) / len(rows) if rows else None

    def _keep_learner_sensitivities(self, batch: Dict) -> None:
        end = self.learner.end_sensitivities
        if not end or "slot" not in batch:
            return
        for j, (slot, seg) in enumerate(zip(batch["slot"].tolist(), batch["segment"].tolist())):
            self._carry[slot] = (seg, {k: v[j] for k, v in end.items()})

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
        if self.cfg.learner.grad_spike_factor > 0:
            row["spike_skipped_updates"] = self.learner.spikes
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
        self.maybe_evaluate()

    # ------------------------------------------------------------------ evaluation
    def eval_policy(self, seed: int):
        """The current weights as a CPU :class:`r2ac.api.Policy` (``RunSession.evaluate`` plays it)."""
        from r2ac.api import Policy

        net = copy.deepcopy(self.net).cpu()
        net.observation_shape = self.obs_shape
        return Policy(net, self.cfg, step=self.counters["step"], greedy=self.cfg.eval.greedy, seed=seed)

    # ------------------------------------------------------------------ persistence
    def checkpoint_extra(self) -> Dict:
        return {"learner": self.learner.state_dict(), "lr_schedule": {
            "learning_rate": float(self.learner.cfg.learning_rate), "total_steps": int(self.learner.total_steps)}}

    def weights(self) -> Dict[str, torch.Tensor]:
        """The current weights on the CPU, detached (what actors load)."""
        return {k: v.detach().cpu() for k, v in self.net.state_dict().items()}

    def curve_title(self) -> str:
        return f"{super().curve_title()}, M={self.M}"

    def close(self) -> None:
        super().close()
        if self.update_logger is not None:
            self.update_logger.close()

    def summary_fields(self, elapsed: float) -> Dict:
        c = self.counters
        summary = {"trajectories": c["trajectories"], "rejected_trajectories": c["rejected_trajectories"],
                   "env_failures": c["env_failures"], "skipped_updates": self.learner.skipped,
                   "actor_failures": c["actor_failures"], "lost_rollouts": c["lost_rollouts"]}
        if self.cfg.learner.grad_spike_factor > 0:
            summary["spike_skipped_updates"] = self.learner.spikes
        if self.model_auto:
            summary["model_auto"] = dict(self.model_auto)
        return summary
