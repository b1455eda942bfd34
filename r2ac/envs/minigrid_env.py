"""``minigrid:<Id>``: a MiniGrid task (Chevalier-Boisvert et al. 2023, the ``minigrid`` package), e.g.
``minigrid:MiniGrid-MemoryS13Random-v0`` or, short, ``minigrid:MemoryS13Random``.

MiniGrid observes a partial view of the grid in front of the agent (7 x 7 cells by default), each cell three
small integers (object type, colour, state), plus the direction the agent faces and a text mission. Here the
view becomes one vector of 0/1 entries: each cell's three integers one-hot (object 11, colour 6, state 3: 20
entries a cell, 980 for the 7 x 7 view), then the direction one-hot (4). The mission text is dropped: on the
tasks this kind serves (Memory, the key-corridor and door tasks) it is one fixed sentence a task, or names
what the view shows anyway. Actions are MiniGrid's 7 discrete ones, all of them (left, right, forward, pick
up, drop, toggle, done), as a user would start. A task's reward is 1 - 0.9 x (steps / max_steps) where it is
solved and 0 otherwise; an episode that reaches ``max_steps`` is cut (``info["final_observation"]`` carries
its last view, for ``learner.truncation_bootstrap``). Options go to ``gymnasium.make`` (e.g. ``max_steps``).
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np

from r2ac.envs.gym_env import GymVecEnv

__all__ = ["MiniGridVecEnv", "OneHotView", "minigrid_id", "minigrid_max_steps"]

DIRECTIONS = 4


def _import_minigrid():
    try:
        import minigrid  # noqa: F401  (registers the MiniGrid-* ids with gymnasium)
        from minigrid.core import constants
    except ImportError as exc:
        raise ValueError(f"minigrid: tasks need the minigrid package (`make install` installs it, or "
                         f"pip install 'r2ac[minigrid]'): {exc}") from exc
    return constants


def minigrid_id(name: str) -> str:
    """``MiniGrid-MemoryS7-v0`` (a registered id) or ``MemoryS7`` (short: the first registered
    ``MiniGrid-<name>-vN``, case-insensitive) -> the registered gymnasium id."""
    _import_minigrid()
    ids = sorted(k for k in gymnasium.registry if k.startswith("MiniGrid-"))
    if name in gymnasium.registry and name.startswith("MiniGrid-"):
        return name
    short = {}
    for full in ids:  # MiniGrid-<name>-v<N>; the highest version wins
        short[full[len("MiniGrid-"):].rpartition("-v")[0].lower()] = full
    found = short.get(name.lower()) or {k.lower(): k for k in ids}.get(name.lower())
    if found is None:
        memory = [k for k in ids if "Memory" in k]
        raise ValueError(f"unknown MiniGrid task {name!r}: give a registered id or its short name, e.g. "
                         f"minigrid:MemoryS13Random; Memory tasks: {', '.join(memory)}; "
                         f"{len(ids)} MiniGrid ids in all (gymnasium.registry)")
    return found


def minigrid_max_steps(name: str, **options: Any) -> int:
    """The episode length at which a MiniGrid task is cut (its ``max_steps``)."""
    env = gymnasium.make(minigrid_id(name), **options)
    try:
        return int(env.unwrapped.max_steps)
    finally:
        env.close()


class OneHotView(gymnasium.ObservationWrapper):
    """MiniGrid's observation dict -> float32 [cells x 20 + 4]: every cell of the view as the one-hots of its
    object, colour and state ids, then the agent's direction one-hot (the mission text is dropped)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        constants = _import_minigrid()
        sizes = (len(constants.OBJECT_TO_IDX), len(constants.COLOR_TO_IDX), len(constants.STATE_TO_IDX))
        image = env.observation_space["image"]
        if len(image.shape) != 3 or image.shape[-1] != len(sizes):
            raise ValueError(f"minigrid: expected a view of (width, height, 3) cell ids, got {image.shape}")
        self.cells = int(image.shape[0] * image.shape[1])
        self.per_cell = int(sum(sizes))
        self.sizes = np.asarray(sizes)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        # index of (cell, field) in the flat vector, before adding the field's id
        self._base = (np.arange(self.cells)[:, None] * self.per_cell + self.offsets[None, :]).astype(np.int64)
        size = self.cells * self.per_cell + DIRECTIONS
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (size,), np.float32)

    def observation(self, observation: dict) -> np.ndarray:
        ids = np.asarray(observation["image"], dtype=np.int64).reshape(self.cells, len(self.sizes))
        if (ids < 0).any() or (ids >= self.sizes).any():
            raise ValueError(f"minigrid: a cell id is out of range {self.sizes.tolist()}")
        out = np.zeros(self.observation_space.shape, np.float32)
        out[(self._base + ids).ravel()] = 1.0
        out[self.cells * self.per_cell + int(observation["direction"])] = 1.0
        return out


class MiniGridVecEnv(GymVecEnv):
    """``minigrid:<Id>``: a MiniGrid task with one-hot views (``OneHotView``), discrete actions, cut
    episodes' final views reported."""

    final_observations = True

    def _factory(self, env_id: str) -> Callable[..., gymnasium.Env]:
        full = minigrid_id(env_id)
        return lambda **kw: OneHotView(gymnasium.make(full, **kw))
