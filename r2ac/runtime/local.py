"""The single-process runtime: actors and the learner in one process, moving trajectories and weights
between the plain ``Actor`` and ``Learner`` classes (``r2ac train`` with ``runtime.kind=local``)."""

from __future__ import annotations

import copy
import json
import os
from typing import Dict, List, Optional

import numpy as np
import torch

from r2ac.agent.actor import Actor
from r2ac.checkpoint import load_checkpoint, load_latest_checkpoint
from r2ac.config import ConfigError, Config, config_from_dict
from r2ac.evaluation import EpisodeQuota
from r2ac.envs import make_vec_env
from r2ac.runtime.common import TrainingSession, build_net, make_env, recreate_envs
from r2ac.runtime.session import actor_seed, set_fast_math, start_run


def train(cfg: Config, resume: bool = False, time_limit_s: Optional[float] = None) -> Dict:
    """Train as configured; returns a summary dict. With ``resume`` the run continues from the newest
    checkpoint in its run directory (counters, weights, optimizer and RNG state). ``time_limit_s`` stops
    the run early (benchmarks)."""
    ckpt = start_run(cfg, resume)
    venvs = [make_env(cfg, i) for i in range(cfg.runtime.num_actors)]
    actors: List[Actor] = []

    def publish(version: int) -> None:
        weights = session.weights()
        for a in actors:
            a.set_weights(weights, version)

    session = TrainingSession(cfg, ckpt, venvs[0].observation_shape, venvs[0].num_actions, publish=publish,
                              time_limit_s=time_limit_s)
    M, updates = session.M, session.learner.updates
    actors += [Actor(copy.deepcopy(session.net).cpu(), v, M, seed=actor_seed(cfg, i, updates),
                     ship_features=session.net.stem_frozen)  # a frozen stem runs on the actors
               for i, v in enumerate(venvs)]
    publish(updates)

    def loop() -> None:
        while not session.done():
            for i, actor in enumerate(actors):
                try:
                    traj = actor.rollout()
                except Exception as e:  # an env that raises is recreated; its partial trajectory dropped
                    session.env_failure(f"actor {i}", f"{type(e).__name__}: {e}")
                    recreate_envs(cfg, actor, i, session.counters["env_failures"])
                    continue
                if not session.add_trajectory(traj, M * actor.B, source=f"actor {i}"):
                    actor.restart()  # a rejected trajectory: new episodes, fresh core state
            session.tick()

    try:
        return session.run(loop)
    finally:
        for a in actors:
            a.close()


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
def play_episodes(net, venv, episodes: int, seed: int) -> np.ndarray:
    """Returns of ``episodes`` episodes of the stochastic policy ``net`` on ``venv`` (closed afterwards),
    each env contributing its first episodes (``EpisodeQuota``: no short-episode bias)."""
    actor = Actor(net, venv, 1, seed=seed)
    quota = EpisodeQuota(venv.num_envs, episodes)
    try:
        while not quota.full():
            r = actor.rollout()["episode_return"][1:]
            quota.add((~torch.isnan(r[0])).numpy(), r[0].numpy())
    finally:
        actor.close()
    return quota.returns()


@torch.no_grad()
def evaluate(path: str, sets: Optional[int] = None, episodes: Optional[int] = None, seed: int = 12345,
             num_envs: Optional[int] = None) -> Dict:
    """k sets of n test episodes with the trained (stochastic) policy, as in the paper: returns the mean
    of the set means and the std over sets, and writes ``eval.json`` next to the run."""
    cfg, ckpt = load_for_eval(path)
    if cfg.algo != "impala":
        raise ConfigError(f"r2ac eval evaluates IMPALA runs; {path} is an algo={cfg.algo} run (its metrics.csv "
                          "holds the training returns)")
    set_fast_math(cfg.runtime.torch_threads)
    sets = cfg.eval.sets if sets is None else sets
    episodes = cfg.eval.episodes if episodes is None else episodes
    if sets < 1 or episodes < 1:
        raise ValueError(f"need at least one set of one episode, got sets={sets}, episodes={episodes}")
    venv = make_vec_env(cfg.env.id, num_envs or cfg.env.num_envs, seed, **dict(cfg.env.options))
    net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    net.load_state_dict(ckpt["model"])
    returns = play_episodes(net, venv, sets * episodes, seed)
    set_means = [float(np.mean(returns[i * episodes:(i + 1) * episodes])) for i in range(sets)]
    result = {"checkpoint": ckpt.get("path", path), "step": int(ckpt["counters"].get("step", 0)), "sets": sets,
              "episodes": episodes, "mean": float(np.mean(set_means)), "std": float(np.std(set_means)),
              "set_means": set_means, "episode_returns": [float(r) for r in returns]}
    out_dir = path if os.path.isdir(path) else os.path.dirname(os.path.dirname(os.path.abspath(path)))
    with open(os.path.join(out_dir, "eval.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result
