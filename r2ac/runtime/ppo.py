"""The PPO runtime (``algo: ppo``): ``train_ppo(cfg, resume=False) -> summary``, one process, rollouts and
epochs in turn (Algorithm 1 of Elelimy et al. 2024; the pieces are in ``r2ac.agent.ppo``).

Same run directory as the IMPALA runtimes (:class:`r2ac.runtime.session.RunSession`): ``config.yaml``,
``metrics.csv`` (one row per rollout), ``learning_curve.png``, ``checkpoints/`` (weights incl. the
observation/return normalisers, Adam state, counters, RNG state), ``summary.json``. ``resume=True``
continues from the newest checkpoint: counters, weights and optimizer; the envs start new episodes from a
zero core state.

Every option is in the config: the ``ppo`` section (``PPOConfig``: rollouts, epochs, the loss, Adam, the
encoder, chunk lengths, normalisation, the trace-memory budget) and the ``model`` section (core,
hidden_size, learning, core_options, reward_input, prev_action_input, episode_start_input,
episode_start_value: ``auto`` is 1 here). The resolved choices (chunk length, normalisation) are in
``summary.json`` under ``ppo_options``.
"""

from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np
import torch

from r2ac.agent.inputs import core_input_size
from r2ac.agent.ppo import PPOLearner, PPONet, RolloutCollector, action_spec, trace_memory
from r2ac.agent.ppo.rollout import InputSpec, resolve_normalization
from r2ac.config import Config
from r2ac.envs import make_config_env
from r2ac.runtime.common import autos_line, resolve_model
from r2ac.runtime.session import RunSession, create_run_dir, env_seed, prepare_run, resolve_device

__all__ = ["PPOSession", "TraceMemoryError", "build_ppo_net", "ppo_input_spec", "ppo_resolved_autos", "train_ppo"]

COUNTERS = ("step", "updates", "iterations", "episodes")


class TraceMemoryError(MemoryError):
    """The stored per-step RTRL traces of one rollout would exceed ``trace_memory_budget_mb``."""


def ppo_episode_start_value(model_cfg) -> float:
    """``model.episode_start_value`` for PPO: ``auto`` is 1 (PPO's input is the observation itself, not raw
    pixels scaled down, see ``r2ac.agent.nets.resolve_episode_start_value``)."""
    v = model_cfg.episode_start_value
    return 1.0 if v == "auto" else float(v)


def ppo_resolved_autos(cfg: Config) -> Dict[str, object]:
    """model key -> what its ``auto`` became under PPO, for each key PPO uses that ``cfg.model`` leaves to
    ``auto``: the previous action as the task declares (``resolve_model``), the episode-start flag 1
    (``ppo_episode_start_value``), the whole frame (``frame_pool`` 1) and none of the raw-frame features
    (``centre_frames``, ``running_centres``, ``frame_extremes``, ``frame_centroids``: PPO normalises its
    observations itself). ``input_scale`` is not used by PPO and is not named."""
    m = cfg.model
    became = {"prev_action_input": bool(resolve_model(cfg).prev_action_input),
              "episode_start_value": ppo_episode_start_value(m), "frame_pool": 1, "centre_frames": False,
              "running_centres": False, "frame_extremes": False, "frame_centroids": False}
    return {k: v for k, v in became.items() if isinstance(getattr(m, k), str) and getattr(m, k).startswith("auto")}


def ppo_input_spec(cfg: Config, continuous: bool) -> InputSpec:
    """What the network input holds besides the observation, as a run of ``cfg`` builds it (training, and
    ``r2ac.load``/``r2ac eval`` of its checkpoints); ``continuous``: the env's actions are a Box."""
    return InputSpec(normalize_observations=resolve_normalization(cfg.ppo.normalize_observations, continuous),
                     reward_input=bool(cfg.model.reward_input),
                     prev_action_input=bool(resolve_model(cfg).prev_action_input),
                     episode_start_input=bool(cfg.model.episode_start_input),
                     episode_start_value=ppo_episode_start_value(cfg.model))


def build_ppo_net(cfg: Config, venv) -> PPONet:
    """The network of Elelimy et al. 2024: the tanh encoder ``ppo.encoder`` (the paper: one 64-unit layer),
    the core of ``cfg.model``, the actor and critic heads."""
    m = resolve_model(cfg)
    if (m.centre_frames is True or m.frame_spread or m.frame_extremes is True or m.frame_centroids is True
            or m.running_centres is True):
        raise ValueError("model.centre_frames=true, model.frame_spread=true, model.frame_extremes=true, "
                         "model.frame_centroids=true and model.running_centres=true are for raw image frames entering "
                         "the IMPALA/A2C core (model.stem=none); PPO's input is the normalised observation "
                         "(ppo.normalize_observations): set model.centre_frames, model.running_centres, "
                         "model.frame_extremes and model.frame_centroids to auto or false and model.frame_spread to "
                         "false with algo=ppo")
    if m.centre_observations:
        raise ValueError("model.centre_observations=true centres the IMPALA/A2C core's raw input; PPO normalises its "
                         "observations itself (ppo.normalize_observations): set model.centre_observations=false with "
                         "algo=ppo")
    if m.frame_pool not in ("auto", 1):
        raise ValueError(f"model.frame_pool={m.frame_pool} pools raw image frames entering the IMPALA/A2C core "
                         "(model.stem=none); PPO's input is the normalised observation, whole: set "
                         "model.frame_pool=auto or 1 with algo=ppo")
    if m.head_hidden or m.head_input or m.head_norm:
        raise ValueError("model.head_hidden, model.head_input and model.head_norm shape the IMPALA/A2C heads; PPO's "
                         "actor and critic are their own tanh MLPs on the core's output: set model.head_hidden=0, "
                         "model.head_input=false and model.head_norm=false with algo=ppo")
    kind, dim = action_spec(venv)
    obs_size = int(np.prod(venv.observation_shape))
    d_in = core_input_size(obs_size, m.reward_input, m.prev_action_input, dim, m.episode_start_input)
    return PPONet(d_in, kind, dim, core=m.core, hidden_size=m.hidden_size, learning=m.learning,
                  core_options=dict(m.core_options), encoder=tuple(cfg.ppo.encoder),
                  log_std_init=cfg.ppo.log_std_init, obs_size=obs_size)


def check_trace_memory(net: PPONet, cfg: Config, budget_mb: float, log=print) -> Dict[str, float]:
    mem = trace_memory(net, cfg.ppo.rollout_length, cfg.env.num_envs)
    mb = mem["bytes"] / 2 ** 20
    log(f"PPO stored states: rollout_length {cfg.ppo.rollout_length} x num_envs {cfg.env.num_envs} x "
        f"({mem['sensitivity_floats_per_step']:.0f} sensitivity + {mem['hidden_floats_per_step']:.0f} hidden "
        f"floats per step) = {mb:.1f} MB (budget {budget_mb:.4g} MB; core {cfg.model.core}/{cfg.model.learning},"
        f" hidden_size {cfg.model.hidden_size})")
    if mb > budget_mb:
        raise TraceMemoryError(
            f"the stored RTRL traces of one rollout need {mb:.1f} MB (rollout_length {cfg.ppo.rollout_length} x "
            f"num_envs {cfg.env.num_envs} x {mem['sensitivity_floats_per_step']:.0f} sensitivity floats per step), "
            f"more than trace_memory_budget_mb={budget_mb:.4g}; lower ppo.rollout_length, env.num_envs or "
            f"model.hidden_size, or raise the budget")
    return mem


class PPOSession(RunSession):
    """One PPO run: network, ``PPOLearner``, ``RolloutCollector`` and the two torch generators (actions,
    minibatch shuffling) on top of :class:`RunSession`. :meth:`iteration` is one rollout and its update.

    The run directory is created only once the network is built and its stored traces fit the budget."""

    def __init__(self, cfg: Config, ckpt: Optional[dict], venv, *, time_limit_s: Optional[float] = None,
                 progress_bar: Optional[bool] = None):
        p = cfg.ppo
        self.net = build_ppo_net(cfg, venv).to(resolve_device(cfg.device))
        self.mem = check_trace_memory(self.net, cfg, p.trace_memory_budget_mb)
        create_run_dir(cfg)
        self.learner = PPOLearner(self.net, p)
        n_chunks = self.learner.chunks(p.rollout_length, cfg.env.num_envs)
        if p.minibatches > n_chunks:
            print(f"note: {p.minibatches} minibatches asked, but a rollout has only {n_chunks} chunks of "
                  f"{self.learner.sequence_length} steps: using {n_chunks}")
        self.act_gen = torch.Generator().manual_seed(cfg.seed * 7919 + 1)
        self.shuffle_gen = torch.Generator().manual_seed(cfg.seed * 7919 + 2)
        self.generators = (self.act_gen, self.shuffle_gen)
        super().__init__(cfg, ckpt, COUNTERS, tags=["algo:ppo", f"learning:{cfg.model.learning}",
                                                    f"core:{cfg.model.core}"],
                         time_limit_s=time_limit_s, progress_bar=progress_bar)
        try:
            self.collector = RolloutCollector(self.net, venv, p, generator=self.act_gen,
                                              reward_input=cfg.model.reward_input,
                                              prev_action_input=resolve_model(cfg).prev_action_input,
                                              episode_start_input=cfg.model.episode_start_input,
                                              episode_start_value=ppo_episode_start_value(cfg.model))
        except BaseException:
            self.close()
            raise
        self.steps_per_rollout = p.rollout_length * cfg.env.num_envs
        self.obs_shape = tuple(venv.observation_shape)
        self.core_params = sum(q.numel() for q in self.net.core.parameters())
        self.model_auto = ppo_resolved_autos(cfg)
        if self.model_auto:  # what the task made of the keys left to auto (config.yaml keeps 'auto')
            self.event(autos_line(self.model_auto))

    def iteration(self) -> None:
        """Collect one rollout, train on it, log its row; stops the run if the weights became non-finite."""
        t0 = time.time()
        ro = self.collector.collect()
        t1 = time.time()
        stats = self.learner.update(ro, self.shuffle_gen)
        t2 = time.time()
        self.counters["step"] += self.steps_per_rollout
        self.counters["iterations"] += 1
        self.episodes.extend(ro.episodes, ro.successes)
        row = dict(stats)
        row.update(self.episodes.pop_metrics())
        row.update(episodes=self.episodes.count, iterations=self.counters["iterations"],
                   rollout_s=t1 - t0, update_s=t2 - t1, steps_per_s=self.steps_per_rollout / max(t2 - t0, 1e-9),
                   trace_memory_mb=self.mem["bytes"] / 2 ** 20, sequence_length=self.learner.sequence_length,
                   rtrl=float(self.cfg.model.learning == "rtrl"), core_parameters=self.core_params,
                   lr=self.cfg.ppo.learning_rate)
        self.logger.log(self.counters["step"], row)
        self.bar.update(self.counters["step"], self.episodes.recent())
        if not all(torch.isfinite(q).all() for q in self.net.parameters()):
            self.status = "stopped: non-finite weights"
            return
        self.maybe_evaluate()

    def eval_policy(self, seed: int):
        """The current weights as a CPU :class:`r2ac.api.PPOPolicy` (``RunSession.evaluate`` plays it)."""
        import copy

        from r2ac.api import PPOPolicy

        net = copy.deepcopy(self.net).cpu()
        net.observation_shape = self.obs_shape
        return PPOPolicy(net, self.cfg, inputs=self.collector.inputs, step=self.counters["step"],
                         greedy=self.cfg.eval.greedy, seed=seed)

    def options(self) -> Dict:
        """The resolved choices of the ``ppo`` section (for the summary and the checkpoint)."""
        p = self.cfg.ppo
        return {"sequence_length": self.learner.sequence_length, "trace_memory_budget_mb": p.trace_memory_budget_mb,
                "normalize_observations": self.collector.normalize_observations,
                "normalize_rewards": self.collector.normalize_rewards,
                "normalize_advantages": p.normalize_advantages, "value_cost": p.value_cost,
                "log_std_init": p.log_std_init}

    def checkpoint_extra(self) -> Dict:
        return {"learner": self.learner.state_dict(), "ppo_options": self.options()}

    def curve_title(self) -> str:
        return f"{self.cfg.name}: {self.cfg.env.id}, PPO {self.cfg.model.core}/{self.cfg.model.learning}"

    def summary_fields(self, elapsed: float) -> Dict:
        return {"algo": "ppo", "iterations": self.counters["iterations"], "skipped_updates": self.learner.skipped,
                "wall_s": elapsed, "core": self.cfg.model.core, "learning": self.cfg.model.learning,
                "core_parameters": self.core_params, "trace_memory_mb": self.mem["bytes"] / 2 ** 20,
                "ppo_options": self.options(), "model_auto": dict(self.model_auto)}


def train_ppo(cfg: Config, resume: bool = False, *, time_limit_s: Optional[float] = None,
              progress_bar: Optional[bool] = None) -> Dict:
    """Train the PPO agent as configured (``cfg.algo == "ppo"``); returns (and writes) the summary."""
    ckpt = prepare_run(cfg, resume)
    venv = make_config_env(cfg.env, cfg.env.num_envs, env_seed(cfg, 0))
    try:
        session = PPOSession(cfg, ckpt, venv, time_limit_s=time_limit_s, progress_bar=progress_bar)

        def loop() -> None:
            t_ckpt = time.time()
            while not session.done() and session.status == "running":
                session.iteration()
                if session.status == "running" and time.time() - t_ckpt >= cfg.checkpoint.interval_s:
                    session.checkpoint()
                    t_ckpt = time.time()

        return session.run(loop, signals=True)
    finally:
        venv.close()
