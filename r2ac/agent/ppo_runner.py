"""Training loop of the PPO agent (``algo: ppo``): ``train_ppo(cfg, resume=False) -> summary``.

Same run directory as the IMPALA runtime: ``config.yaml``, ``metrics.csv`` (one row per rollout),
``learning_curve.png``, ``checkpoints/`` (weights incl. the observation/return normalisers, Adam state,
counters, RNG state), ``summary.json``. ``resume=True`` continues from the newest checkpoint: counters,
weights and optimizer; the envs start new episodes from a zero core state.

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

import collections
import dataclasses
import json
import math
import os
import time
from typing import Dict, Optional

import numpy as np
import torch

from r2ac.agent.ppo import PPOLearner, PPONet, RolloutCollector, action_spec, trace_memory
from r2ac.checkpoint import capture_rng_state, restore_rng_state, save_run_checkpoint
from r2ac.config import Config, ConfigError, config_to_dict, save_config
from r2ac.envs import make_vec_env
from r2ac.logger import RunLogger, plot_learning_curve, progress
from r2ac.runtime.common import checkpoint_to_resume, run_dir_of, set_fast_math, stop_status

__all__ = ["PPO_OPTION_DEFAULTS", "TraceMemoryError", "build_ppo_net", "ppo_options", "train_ppo"]

PPO_OPTION_DEFAULTS: Dict[str, object] = {
    "sequence_length": None,
    "trace_memory_budget_mb": 2048.0,
    "normalize_observations": None,
    "normalize_rewards": None,
    "normalize_advantages": True,
    "value_cost": 0.5,
    "log_std_init": 0.0,
}


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
    """The network of seed 001 from ``cfg.model``: ``stem: mlp`` gives the tanh encoder with layers
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


def train_ppo(cfg: Config, resume: bool = False, *, time_limit_s: Optional[float] = None,
              progress_bar: Optional[bool] = None, **options) -> Dict:
    """Train the PPO agent as configured (``cfg.algo == "ppo"``); returns (and writes) the summary."""
    run_dir = run_dir_of(cfg)
    ckpt = checkpoint_to_resume(run_dir, resume)
    set_fast_math(cfg.runtime.torch_threads)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    venv = make_vec_env(cfg.env.id, cfg.env.num_envs, cfg.seed * 1000, **dict(cfg.env.options))
    try:
        kind, _ = action_spec(venv)
        if ckpt is not None:  # a resumed run keeps its options unless overridden again
            options = {**ckpt["extra"].get("ppo_options", {}), **options}
        opts = ppo_options(cfg, kind, options)
        device = torch.device("cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
                              else "cpu")
        net = build_ppo_net(cfg, venv, opts).to(device)
        mem = check_trace_memory(net, cfg, float(opts["trace_memory_budget_mb"]))
        os.makedirs(run_dir, exist_ok=True)
        save_config(cfg, os.path.join(run_dir, "config.yaml"))
        p = cfg.ppo
        learner = PPOLearner(net, epochs=p.epochs, minibatches=p.minibatches, clip=p.clip, value_clip=p.value_clip,
                             value_cost=float(opts["value_cost"]), entropy_cost=p.entropy_cost,
                             learning_rate=p.learning_rate, adam_eps=p.adam_eps, grad_norm_clip=p.grad_norm_clip,
                             gae_lambda=p.gae_lambda, discount=p.discount, refresh_traces=p.refresh_traces,
                             sequence_length=int(opts["sequence_length"]),
                             normalize_advantages=bool(opts["normalize_advantages"]),
                             max_nonfinite_updates=p.max_nonfinite_updates)
        n_chunks = learner.chunks(p.rollout_length, cfg.env.num_envs)
        if p.minibatches > n_chunks:
            print(f"note: {p.minibatches} minibatches asked, but a rollout has only {n_chunks} chunks of "
                  f"{learner.sequence_length} steps: using {n_chunks}")
        act_gen = torch.Generator().manual_seed(cfg.seed * 7919 + 1)
        shuffle_gen = torch.Generator().manual_seed(cfg.seed * 7919 + 2)
        counters = {"step": 0, "iterations": 0, "episodes": 0}
        if ckpt is not None:
            net.load_state_dict(ckpt["model"])
            learner.load_state_dict(ckpt["extra"]["learner"])
            counters.update({k: int(v) for k, v in ckpt["counters"].items() if k in counters})
            restore_rng_state(ckpt["rng"], [act_gen, shuffle_gen])
        collector = RolloutCollector(net, venv, p.rollout_length, discount=p.discount, generator=act_gen,
                                     reward_input=cfg.model.reward_input,
                                     prev_action_input=cfg.model.prev_action_input,
                                     normalize_observations=bool(opts["normalize_observations"]),
                                     normalize_rewards=bool(opts["normalize_rewards"]))
    except BaseException:
        venv.close()
        raise

    def checkpoint() -> str:
        return save_run_checkpoint(
            run_dir, counters["step"], keep=cfg.checkpoint.keep, model_state=net.state_dict(),
            optimizer_state=None, counters={**counters, "updates": learner.updates},
            rng_state=capture_rng_state([act_gen, shuffle_gen]), config=config_to_dict(cfg),
            extra={"learner": learner.state_dict(), "ppo_options": dict(opts)})

    tags = list(cfg.logger.wandb_tags) + ["algo:ppo", f"learning:{cfg.model.learning}", f"core:{cfg.model.core}"]
    logger = RunLogger(run_dir, dataclasses.replace(cfg.logger, wandb_tags=tags), config_to_dict(cfg), cfg.name,
                       resume_step=counters["step"] if ckpt is not None else None)
    show = cfg.logger.progress_bar if progress_bar is None else progress_bar
    bar = progress(cfg.total_steps, initial=counters["step"], enabled=show)
    recent = collections.deque(maxlen=100)
    start, start_step = time.time(), counters["step"]
    t_ckpt = start
    status = "running"
    steps_per_rollout = p.rollout_length * cfg.env.num_envs
    core_params = sum(q.numel() for q in net.core.parameters())
    try:
        while counters["step"] < cfg.total_steps:
            if time_limit_s is not None and time.time() - start >= time_limit_s:
                break
            t0 = time.time()
            ro = collector.collect()
            t1 = time.time()
            stats = learner.update(ro, shuffle_gen)
            t2 = time.time()
            counters["step"] += steps_per_rollout
            counters["iterations"] += 1
            counters["episodes"] += len(ro.episodes)
            row = dict(stats)
            if ro.episodes:
                rets, lens = zip(*ro.episodes)
                recent.extend(rets)
                row.update(episode_return=float(np.mean(rets)), episode_length=float(np.mean(lens)))
            row.update(episodes=counters["episodes"], iterations=counters["iterations"],
                       rollout_s=t1 - t0, update_s=t2 - t1, steps_per_s=steps_per_rollout / max(t2 - t0, 1e-9),
                       trace_memory_mb=mem["bytes"] / 2 ** 20, sequence_length=learner.sequence_length,
                       rtrl=float(cfg.model.learning == "rtrl"), core_parameters=core_params,
                       lr=cfg.ppo.learning_rate)
            logger.log(counters["step"], row)
            bar.update(counters["step"], float(np.mean(recent)) if recent else None)
            if not all(torch.isfinite(q).all() for q in net.parameters()):
                status = "stopped: non-finite weights"
                break
            if time.time() - t_ckpt >= cfg.checkpoint.interval_s:
                checkpoint()
                t_ckpt = time.time()
        if status == "running":
            status = "finished" if counters["step"] >= cfg.total_steps else "stopped: time limit"
    except BaseException as e:  # the summary says why the run ended (the exception goes on)
        status = stop_status(e)
        raise
    finally:
        try:
            checkpoint()
        finally:
            bar.close()
            logger.close()
            venv.close()
            summary = _finish(cfg, run_dir, status, counters, learner, recent, start, start_step, mem, opts,
                              core_params)
    return summary


def _finish(cfg, run_dir, status, counters, learner, recent, start, start_step, mem, opts, core_params) -> Dict:
    metrics_csv = os.path.join(run_dir, "metrics.csv")
    if os.path.exists(metrics_csv):
        try:
            plot_learning_curve(metrics_csv, os.path.join(run_dir, "learning_curve.png"), smooth=0.6,
                                title=f"{cfg.name}: {cfg.env.id}, PPO {cfg.model.core}/{cfg.model.learning}")
        except Exception as e:  # a plot must never lose a run
            print(f"warning: could not plot the learning curve: {e}")
    elapsed = max(time.time() - start, 1e-9)
    summary = {"run_dir": run_dir, "status": status, "algo": "ppo", "step": counters["step"],
               "iterations": counters["iterations"], "updates": learner.updates, "episodes": counters["episodes"],
               "skipped_updates": learner.skipped,
               "recent_return": float(np.mean(recent)) if recent else None,
               "steps_per_s": (counters["step"] - start_step) / elapsed, "wall_s": elapsed,
               "core": cfg.model.core, "learning": cfg.model.learning, "core_parameters": core_params,
               "trace_memory_mb": mem["bytes"] / 2 ** 20, "ppo_options": dict(opts)}
    if summary["recent_return"] is not None and not math.isfinite(summary["recent_return"]):
        summary["recent_return"] = None
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
