"""The single-process runtime: actors and the learner in one process, moving trajectories and weights
between the plain ``Actor`` and ``Learner`` classes (``r2ac train`` with ``runtime.kind=local``)."""

from __future__ import annotations

import copy
from typing import Dict, List, Optional

from r2ac.agent.actor import Actor
from r2ac.config import Config
from r2ac.runtime.common import TrainingSession, make_env, recreate_envs
from r2ac.runtime.session import actor_seed, start_run


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
                     ship_features=session.net.stem_frozen,  # a frozen stem runs on the actors
                     desync=cfg.env.desync, truncation_values=cfg.learner.truncation_bootstrap)
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
        return session.run(loop, signals=True)
    finally:
        for a in actors:
            a.close()
