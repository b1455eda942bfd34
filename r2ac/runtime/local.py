"""The single-process runtime: actors and the learner in one process, moving trajectories and weights
between the plain ``Actor`` and ``Learner`` classes (``r2ac train`` with ``runtime.kind=local``)."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional

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

    overlap = cfg.overlaps
    latest: Dict = {}

    def publish(version: int) -> None:
        weights = session.weights()
        if overlap:  # an actor may be rolling out: each takes the newest weights before its next rollout
            latest.update(weights=weights, version=version)
            return
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

    def collected(i: int, rollout: Callable[[], Dict]) -> Optional[Dict]:
        """Actor i's trajectory from ``rollout()``; None after an env failure (its envs are recreated and
        the partial trajectory dropped)."""
        try:
            return rollout()
        except Exception as e:  # an env that raises is recreated; its partial trajectory dropped
            session.env_failure(f"actor {i}", f"{type(e).__name__}: {e}")
            recreate_envs(cfg, actors[i], i, session.counters["env_failures"])
            return None

    def train_on(i: int, traj: Optional[Dict]) -> bool:
        """Train on actor i's trajectory; False if it was rejected (then actor i must start over)."""
        return traj is None or session.add_trajectory(traj, M * actors[i].B, source=f"actor {i}")

    def sync_loop() -> None:
        while not session.done():
            for i, actor in enumerate(actors):
                if not train_on(i, collected(i, actor.rollout)):
                    actor.restart()  # a rejected trajectory: new episodes, fresh core state
            session.tick()

    def overlapped_loop() -> None:
        """``runtime.overlap``: actor i + 1's rollout (with the weights published so far) runs in a second
        thread while the learner trains on actor i's trajectory. What each rollout and update sees is fixed
        by this order, not by the threads' timing. Everything but the rollout itself stays in this thread."""
        def submit(i: int):
            a = actors[i]
            if a.version != latest["version"]:
                a.set_weights(latest["weights"], latest["version"])
            return i, pool.submit(a.rollout)

        with ThreadPoolExecutor(1, thread_name_prefix="r2ac-actor") as pool:
            i, running = submit(0)
            while not session.done():
                traj = collected(i, running.result)
                done_i, (i, running) = i, submit((i + 1) % len(actors))
                if not train_on(done_i, traj):
                    if i == done_i:  # its next rollout went on from the rejected state: drop that one too
                        collected(i, running.result)
                        session.counters["lost_rollouts"] += 1
                        running = None
                    actors[done_i].restart()  # new episodes, fresh core state
                    if running is None:
                        i, running = submit(i)
                if i == 0:
                    session.tick()

    try:
        return session.run(overlapped_loop if overlap else sync_loop, signals=True)
    finally:
        for a in actors:
            a.close()
