"""The PPO runtime (``algo: ppo``): ``train_ppo(cfg, resume=False) -> summary``, one process, rollouts and
epochs in turn (Algorithm 1 of Elelimy et al. 2024; the pieces are in ``r2ac.agent.ppo``).

Same run directory as the IMPALA runtimes (:class:`r2ac.runtime.session.RunSession`): ``config.yaml``,
``metrics.csv`` (one row per rollout), ``learning_curve.png``, ``checkpoints/`` (weights incl. the
observation/return normalisers, Adam state, counters, RNG state), ``summary.json``. ``resume=True``
continues from the newest checkpoint: counters, weights and optimizer; the envs start new episodes from a
zero core state.

Options the config schema does not have yet are read from ``cfg.ppo`` when present, else from the keyword
arguments of ``train_ppo``, else from ``PPO_OPTION_DEFAULTS``:

    sequence_length          chunk length C of the minibatches. None: 1 with RTRL (the paper's per-step
                             stored traces), ``learner.unroll_length`` with TBPTT (the truncation length)
    trace_memory_budget_mb   refuse to start when the stored per-step states would exceed this
    normalize_observations   running mean/std of observations. None: on for continuous actions
    normalize_rewards        divide rewards by the running std of the discounted return. None: as above
    normalize_advantages     per minibatch (True)
    value_cost               weight of the value loss (0.5)
    log_std_init             initial log-std of the Gaussian policy (0.0)
"""

from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np
import torch

from r2ac.agent.ppo import PPOLearner, PPONet, RolloutCollector, action_spec, trace_memory
from r2ac.config import Config, ConfigError
from r2ac.envs import make_vec_env
from r2ac.runtime.session import RunSession, create_run_dir, env_seed, prepare_run

__all__ = ["PPO_OPTION_DEFAULTS", "PPOSession", "TraceMemoryError", "build_ppo_net", "ppo_options", "train_ppo"]

PPO_OPTION_DEFAULTS: Dict[str, object] = {
    "sequence_length": None,
    "trace_memory_budget_mb": 2048.0,
    "normalize_observations": None,
    "normalize_rewards": None,
    "normalize_advantages": True,
    "value_cost": 0.5,
    "log_std_init": 0.0,
}

COUNTERS = ("step", "updates", "iterations", "episodes")


class TraceMemoryError(MemoryError):
    """The stored per-step RTRL traces of one rollout would exceed ``trace_memory_budget_mb``."""


def ppo_options(cfg: Config, action_kind: str, overrides: Optional[dict] = None) -> Dict[str, object]:
    """Resolve the options above: keyword override > ``cfg.ppo.<name>`` (if the schema has it) > default."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(PPO_OPTION_DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown PPO option(s) {unknown}; known: {', '.join(PPO_OPTION_DEFAULTS)}")
    opts = {}
    for k, default in PPO_OPTION_DEFAULTS.items():
        opts[k] = overrides[k] if k in overrides else getattr(cfg.ppo, k, default)
    # the config's sentinels: sequence_length 0 and "auto" mean "choose from the setting"
    if opts["sequence_length"] == 0:
        opts["sequence_length"] = None
    for k in ("normalize_observations", "normalize_rewards"):
        opts[k] = {"auto": None, "on": True, "off": False}.get(opts[k], opts[k])
    if opts["sequence_length"] is None:
        opts["sequence_length"] = 1 if cfg.model.learning == "rtrl" else int(cfg.learner.unroll_length)
    for k in ("normalize_observations", "normalize_rewards"):
        if opts[k] is None:
            opts[k] = action_kind == "continuous"
    return opts


def build_ppo_net(cfg: Config, venv, opts: Dict[str, object]) -> PPONet:
    """The network of Elelimy et al. 2024 from ``cfg.model``: ``stem: mlp`` gives the tanh encoder with layers
    (*stem_channels, stem_fc) (the paper: one 64-unit layer), ``stem: none`` feeds the input to the core."""
    m = cfg.model
    if m.stem == "mlp":
        encoder = tuple(m.stem_channels) + (m.stem_fc,)
    elif m.stem == "none":
        encoder = ()
    else:
        raise ConfigError(f"model.stem: the PPO agent takes vector observations; use model.stem=mlp (a "
                          f"tanh layer of model.stem_fc units, 64 in the paper) or none, not {m.stem!r}")
    kind, dim = action_spec(venv)
    obs_size = int(np.prod(venv.observation_shape))
    d_in = RolloutCollector.input_size(obs_size, kind, dim, m.reward_input, m.prev_action_input)
    return PPONet(d_in, kind, dim, core=m.core, hidden_size=m.hidden_size, learning=m.learning,
                  core_options=dict(m.core_options), encoder=encoder, log_std_init=float(opts["log_std_init"]),
                  obs_size=obs_size)


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

    def __init__(self, cfg: Config, ckpt: Optional[dict], venv, options: Optional[dict] = None, *,
                 time_limit_s: Optional[float] = None, progress_bar: Optional[bool] = None):
        kind, _ = action_spec(venv)
        options = dict(options or {})
        if ckpt is not None:  # a resumed run keeps its options unless overridden again
            options = {**ckpt["extra"].get("ppo_options", {}), **options}
        opts = self.opts = ppo_options(cfg, kind, options)
        device = torch.device("cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
                              else "cpu")
        self.net = build_ppo_net(cfg, venv, opts).to(device)
        self.mem = check_trace_memory(self.net, cfg, float(opts["trace_memory_budget_mb"]))
        create_run_dir(cfg)
        p = cfg.ppo
        self.learner = PPOLearner(
            self.net, epochs=p.epochs, minibatches=p.minibatches, clip=p.clip, value_clip=p.value_clip,
            value_cost=float(opts["value_cost"]), entropy_cost=p.entropy_cost, learning_rate=p.learning_rate,
            adam_eps=p.adam_eps, grad_norm_clip=p.grad_norm_clip, gae_lambda=p.gae_lambda, discount=p.discount,
            refresh_traces=p.refresh_traces, sequence_length=int(opts["sequence_length"]),
            normalize_advantages=bool(opts["normalize_advantages"]), max_nonfinite_updates=p.max_nonfinite_updates)
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
            self.collector = RolloutCollector(
                self.net, venv, p.rollout_length, discount=p.discount, generator=self.act_gen,
                reward_input=cfg.model.reward_input, prev_action_input=cfg.model.prev_action_input,
                normalize_observations=bool(opts["normalize_observations"]),
                normalize_rewards=bool(opts["normalize_rewards"]))
        except BaseException:
            self.close()
            raise
        self.steps_per_rollout = p.rollout_length * cfg.env.num_envs
        self.core_params = sum(q.numel() for q in self.net.core.parameters())

    def iteration(self) -> None:
        """Collect one rollout, train on it, log its row; stops the run if the weights became non-finite."""
        t0 = time.time()
        ro = self.collector.collect()
        t1 = time.time()
        stats = self.learner.update(ro, self.shuffle_gen)
        t2 = time.time()
        self.counters["step"] += self.steps_per_rollout
        self.counters["iterations"] += 1
        self.episodes.extend(ro.episodes)
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

    def checkpoint_extra(self) -> Dict:
        return {"learner": self.learner.state_dict(), "ppo_options": dict(self.opts)}

    def curve_title(self) -> str:
        return f"{self.cfg.name}: {self.cfg.env.id}, PPO {self.cfg.model.core}/{self.cfg.model.learning}"

    def summary_fields(self, elapsed: float) -> Dict:
        return {"algo": "ppo", "iterations": self.counters["iterations"], "skipped_updates": self.learner.skipped,
                "wall_s": elapsed, "core": self.cfg.model.core, "learning": self.cfg.model.learning,
                "core_parameters": self.core_params, "trace_memory_mb": self.mem["bytes"] / 2 ** 20,
                "ppo_options": dict(self.opts)}


def train_ppo(cfg: Config, resume: bool = False, *, time_limit_s: Optional[float] = None,
              progress_bar: Optional[bool] = None, **options) -> Dict:
    """Train the PPO agent as configured (``cfg.algo == "ppo"``); returns (and writes) the summary."""
    ckpt = prepare_run(cfg, resume)
    venv = make_vec_env(cfg.env.id, cfg.env.num_envs, env_seed(cfg, 0), **dict(cfg.env.options))
    try:
        session = PPOSession(cfg, ckpt, venv, options, time_limit_s=time_limit_s, progress_bar=progress_bar)

        def loop() -> None:
            t_ckpt = time.time()
            while not session.done() and session.status == "running":
                session.iteration()
                if session.status == "running" and time.time() - t_ckpt >= cfg.checkpoint.interval_s:
                    session.checkpoint()
                    t_ckpt = time.time()

        return session.run(loop)
    finally:
        venv.close()
