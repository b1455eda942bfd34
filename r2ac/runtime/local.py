"""The single-process runtime: actors and the learner in one process, moving trajectories and weights
between the plain ``Actor`` and ``Learner`` classes (``r2ac train`` with ``runtime.kind=local``)."""

from __future__ import annotations

import collections
import copy
import json
import math
import os
import time
from typing import Dict, List, Optional

import numpy as np
import torch

from r2ac.agent.actor import Actor
from r2ac.agent.learner import Learner, NonFiniteLossError
from r2ac.agent.nets import AgentNet
from r2ac.agent.trajectory import Batcher, validate
from r2ac.checkpoint import capture_rng_state, load_checkpoint, load_latest_checkpoint, restore_rng_state, \
    save_run_checkpoint
from r2ac.config import Config, ConfigError, config_from_dict, config_to_dict, save_config
from r2ac.envs import make_vec_env
from r2ac.logger import RunLogger, plot_learning_curve, progress


def set_fast_math(torch_threads: int = 1) -> None:
    """Flush denormal floats to zero on CPU: RTRL sensitivities and gate products decay geometrically,
    and denormal arithmetic made CPU training 2-6x slower (measured). Set the intra-op thread count
    (``runtime.torch_threads``): with the small per-step work of actors, OpenMP threads that spin while
    other processes share the cores made a 2-core run 15x slower with 2 threads than with 1 (measured)."""
    torch.set_flush_denormal(True)
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


def build_net(cfg: Config, observation_shape, num_actions) -> AgentNet:
    if cfg.stem.path:
        raise ConfigError("stem.path: loading a pretrained stem is not available in this version yet")
    return AgentNet.from_config(cfg.model, observation_shape, num_actions, reward_clip=cfg.learner.reward_clip)


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


def train(cfg: Config, resume: bool = False) -> Dict:
    """Train as configured; returns a summary dict. With ``resume`` the run continues from the newest
    checkpoint in its run directory (counters, weights, optimizer and RNG state)."""
    run_dir = run_dir_of(cfg)
    ckpt = None
    if resume:
        ckpt = load_latest_checkpoint(run_dir)
        if ckpt is None:
            raise FileNotFoundError(f"--resume {run_dir}: no checkpoint found in {run_dir}/checkpoints")
    elif load_latest_checkpoint(run_dir) is not None:
        raise FileExistsError(
            f"run directory {run_dir} already holds checkpoints: continue it with `r2ac train --resume {run_dir}` "
            f"or choose another run_dir=... / name=...")
    os.makedirs(run_dir, exist_ok=True)
    save_config(cfg, os.path.join(run_dir, "config.yaml"))
    set_fast_math(cfg.runtime.torch_threads)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    device = resolve_device(cfg.device)

    venvs = [make_env(cfg, i) for i in range(cfg.runtime.num_actors)]
    obs_shape, num_actions = venvs[0].observation_shape, venvs[0].num_actions
    net = build_net(cfg, obs_shape, num_actions).to(device)
    learner = Learner(net, cfg.learner, cfg.total_steps, device)
    counters = {"step": 0, "updates": 0, "episodes": 0, "rejected_trajectories": 0, "env_failures": 0}
    if ckpt is not None:
        net.load_state_dict(ckpt["model"])
        learner.load_state_dict(ckpt["extra"]["learner"])
        counters.update({k: int(v) for k, v in ckpt["counters"].items() if k in counters})
        restore_rng_state(ckpt["rng"])
    M = cfg.learner.unroll_length
    actors = [Actor(copy.deepcopy(net).cpu(), v, M, seed=cfg.seed * 1000 + i + 7919 * counters["updates"])
              for i, v in enumerate(venvs)]
    publish = lambda: {k: v.detach().cpu() for k, v in net.state_dict().items()}  # noqa: E731
    weights = publish()
    for a in actors:
        a.set_weights(weights, learner.updates)
    batcher = Batcher(cfg.learner.batch_size)
    logger = RunLogger(run_dir, cfg.logger, config_to_dict(cfg), cfg.name,
                       resume_step=counters["step"] if ckpt is not None else None)
    episodes = RecentEpisodes()
    episodes.count = counters["episodes"]
    bar = progress(cfg.total_steps, initial=counters["step"], enabled=cfg.logger.progress_bar)
    state_spec = net.core.state_spec()

    def checkpoint():
        counters["updates"], counters["episodes"] = learner.updates, episodes.count
        save_run_checkpoint(run_dir, counters["step"], keep=cfg.checkpoint.keep, model_state=net.state_dict(),
                            optimizer_state=None, counters=counters, rng_state=capture_rng_state(),
                            config=config_to_dict(cfg), extra={"learner": learner.state_dict()})

    last_log = last_ckpt = time.time()
    steps_at_log = counters["step"]
    stats: Dict[str, float] = {}
    status = "finished"
    try:
        while counters["step"] < cfg.total_steps:
            for i, actor in enumerate(actors):
                try:
                    traj = actor.rollout()
                except Exception as e:  # an env that raises is recreated; its partial trajectory dropped
                    counters["env_failures"] += 1
                    bar.write(f"env failure in actor {i} ({type(e).__name__}: {e}); recreating its envs")
                    actor.venv.close()
                    actor.venv = make_env(cfg, i + 100 * counters["env_failures"])
                    actor.restart()
                    continue
                counters["step"] += M * actor.B
                reason = validate(traj, unroll_length=M, num_actions=num_actions, state_spec=state_spec,
                                  obs_shape=obs_shape)
                if reason is not None:
                    counters["rejected_trajectories"] += 1
                    bar.write(f"rejected a trajectory from actor {i}: {reason}")
                    continue
                episodes.add(traj)
                for batch in batcher.add(traj):
                    stats = learner.update(batch)
                    weights = publish()
                    for a in actors:
                        a.set_weights(weights, learner.updates)
            bar.update(counters["step"], episodes.recent())
            now = time.time()
            if now - last_log >= cfg.logger.log_interval_s or counters["step"] >= cfg.total_steps:
                row = {**stats, **episodes.pop_metrics(), "updates": learner.updates,
                       "steps_per_s": (counters["step"] - steps_at_log) / max(now - last_log, 1e-9),
                       "rejected_trajectories": counters["rejected_trajectories"],
                       "env_failures": counters["env_failures"]}
                logger.log(counters["step"], row)
                last_log, steps_at_log = now, counters["step"]
            if now - last_ckpt >= cfg.checkpoint.interval_s:
                checkpoint()
                last_ckpt = now
    except NonFiniteLossError:
        status = "stopped: non-finite loss"
        raise
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        checkpoint()
        bar.close()
        logger.close()
        for a in actors:
            a.close()
        metrics_csv = os.path.join(run_dir, "metrics.csv")
        if os.path.exists(metrics_csv):
            try:
                plot_learning_curve(metrics_csv, os.path.join(run_dir, "learning_curve.png"), smooth=0.6,
                                    title=f"{cfg.name}: {cfg.env.id}, {cfg.model.core}/{cfg.model.learning}, M={M}")
            except Exception as e:  # a plot must never lose a run
                print(f"warning: could not plot the learning curve: {e}")
    summary = {"run_dir": run_dir, "status": status, "step": counters["step"], "updates": learner.updates,
               "episodes": episodes.count, "recent_return": episodes.recent()}
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def load_for_eval(path: str):
    """A run directory or a checkpoint file -> (config, checkpoint)."""
    if os.path.isdir(path):
        ckpt = load_latest_checkpoint(path)
        if ckpt is None:
            raise FileNotFoundError(f"{path} has no checkpoints (expected {path}/checkpoints/ckpt_*.pt)")
    elif os.path.isfile(path):
        ckpt = load_checkpoint(path)
    else:
        raise FileNotFoundError(f"{path}: no such run directory or checkpoint file")
    return config_from_dict(ckpt["config"]), ckpt


@torch.no_grad()
def evaluate(path: str, sets: Optional[int] = None, episodes: Optional[int] = None, seed: int = 12345,
             num_envs: Optional[int] = None) -> Dict:
    """k sets of n test episodes with the trained (stochastic) policy, as in the paper: returns the mean
    of the set means and the std over sets, and writes ``eval.json`` next to the run."""
    cfg, ckpt = load_for_eval(path)
    set_fast_math(cfg.runtime.torch_threads)
    sets = cfg.eval.sets if sets is None else sets
    episodes = cfg.eval.episodes if episodes is None else episodes
    if sets < 1 or episodes < 1:
        raise ValueError(f"need at least one set of one episode, got sets={sets}, episodes={episodes}")
    venv = make_vec_env(cfg.env.id, num_envs or cfg.env.num_envs, seed, **dict(cfg.env.options))
    net = build_net(cfg, venv.observation_shape, venv.num_actions)
    net.load_state_dict(ckpt["model"])
    actor = Actor(net, venv, 1, seed=seed)
    returns: List[float] = []
    need = sets * episodes
    while len(returns) < need:
        traj = actor.rollout()
        r = traj["episode_return"][1:]
        returns += r[~torch.isnan(r)].tolist()
    actor.close()
    set_means = [float(np.mean(returns[i * episodes:(i + 1) * episodes])) for i in range(sets)]
    result = {"checkpoint": ckpt.get("path", path), "step": int(ckpt["counters"].get("step", 0)), "sets": sets,
              "episodes": episodes, "mean": float(np.mean(set_means)), "std": float(np.std(set_means)),
              "set_means": set_means}
    out_dir = path if os.path.isdir(path) else os.path.dirname(os.path.dirname(os.path.abspath(path)))
    with open(os.path.join(out_dir, "eval.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result
