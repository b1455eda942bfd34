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
its last view, for ``learner.truncation_bootstrap``). Options go to ``gymnasium.make`` (e.g. ``max_steps``),
except ``fast_view`` (below).

MiniGrid makes each view by copying the cells in front of the agent into a grid of objects, rotating that grid
one cell at a time (``Grid.rotate_left``, up to four times), then walking it for occlusion and encoding it:
about three quarters of a step's time. ``fast_view`` (default true) has each env make the same view from the
cells' ids with numpy instead (:func:`fast_gen_obs`), the same array bit for bit (tested against MiniGrid's
own on random walks through several tasks); ``fast_view=false`` keeps MiniGrid's. A task whose class makes
its own views (overrides ``gen_obs``, ``gen_obs_grid`` or ``get_view_exts``) keeps its own either way.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np

from r2ac.envs.gym_env import GymVecEnv

__all__ = ["MiniGridVecEnv", "OneHotView", "fast_gen_obs", "minigrid_id", "minigrid_max_steps", "use_fast_view"]

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
    """The episode length at which a MiniGrid task is cut (its ``max_steps``); ``options`` as the env's."""
    options.pop("fast_view", None)  # r2ac's, not the task's
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


def fast_gen_obs(env) -> dict:
    """MiniGrid's ``MiniGridEnv.gen_obs`` for the unwrapped ``env``, made from cell ids: the square of
    ``agent_view_size`` cells in front of the agent (cells off the grid are walls), turned so the agent looks
    up from the bottom row's middle, the cells hidden behind walls and closed doors unseen (0, 0, 0), the
    agent's own cell showing what it carries (or empty). The same dict as MiniGrid's (image uint8 [view,
    view, 3], direction, mission)."""
    size = env.agent_view_size
    top_x, top_y, _, _ = env.get_view_exts(size)
    grid = env.grid
    width, height, cells = grid.width, grid.height, grid.grid
    empty, wall = _EMPTY, _off_grid_wall()
    codes, opaque = [], []  # row j of the view before turning, then column i
    for y in range(top_y, top_y + size):
        inside = 0 <= y < height
        for x in range(top_x, top_x + size):
            v = cells[y * width + x] if inside and 0 <= x < width else wall
            if v is None:
                codes.append(empty)
                opaque.append(False)
            else:
                codes.append(v.encode())
                opaque.append(not v.see_behind())
    # [i, j]: column i, row j, as MiniGrid's Grid indexes its cells
    ids = np.array(codes, np.uint8).reshape(size, size, 3).transpose(1, 0, 2)
    opaque = np.array(opaque, bool).reshape(size, size).T
    turns = (env.agent_dir + 1) % 4  # Grid.rotate_left, agent_dir + 1 times: new[j, n-1-i] = old[i, j]
    for _ in range(turns):
        ids = ids.transpose(1, 0, 2)[:, ::-1]
        opaque = opaque.T[:, ::-1]
    agent = (size // 2, size - 1)
    if env.see_through_walls:
        seen = np.ones((size, size), bool)
    else:
        seen = _visible(opaque, agent)
    image = np.where(seen[:, :, None], ids, 0).astype(np.uint8)
    image[agent] = env.carrying.encode() if env.carrying else empty
    return {"image": image, "direction": env.agent_dir, "mission": env.mission}


_EMPTY = (1, 0, 0)  # MiniGrid's OBJECT_TO_IDX["empty"], no colour, no state


def _off_grid_wall():
    from minigrid.core.world_object import Wall

    global _WALL
    if _WALL is None:
        _WALL = Wall()
    return _WALL


_WALL = None


def _visible(opaque: np.ndarray, agent: tuple) -> np.ndarray:
    """MiniGrid's ``Grid.process_vis`` on the turned view (``opaque`` bool [i, j]: column i, row j), with each
    row a bit mask (bit i: column i). From the agent's cell, light spreads along a row both ways over open
    cells (an opaque cell is lit and stops it), and each lit open cell lights the three cells above it; row by
    row up from the agent's. Bool [i, j], as MiniGrid's."""
    size = opaque.shape[0]
    full = (1 << size) - 1
    walls = (opaque * (1 << np.arange(size))[:, None]).sum(0).tolist()  # per row j
    rows = [0] * size
    lit = 1 << agent[0]
    for j in range(agent[1], -1, -1):
        open_ = full & ~walls[j]
        while True:  # spread over open cells, one cell a round, until nothing new is lit
            more = lit | (((lit & open_) << 1) | ((lit & open_) >> 1)) & full
            if more == lit:
                break
            lit = more
        rows[j] = lit
        shine = lit & open_
        lit = (shine | (shine << 1) | (shine >> 1)) & full  # the row above
    return ((np.array(rows)[None, :] >> np.arange(size)[:, None]) & 1).astype(bool)


def use_fast_view(env: gymnasium.Env) -> bool:
    """Give the MiniGrid env under ``env`` :func:`fast_gen_obs` as its ``gen_obs`` (in place); False, and
    nothing changed, for a task that makes its own views (a class that overrides how MiniGrid makes them)."""
    from minigrid.minigrid_env import MiniGridEnv

    base = env.unwrapped
    if not isinstance(base, MiniGridEnv) or any(getattr(type(base), name) is not getattr(MiniGridEnv, name)
                                                for name in ("gen_obs", "gen_obs_grid", "get_view_exts")):
        return False
    base.gen_obs = lambda: fast_gen_obs(base)
    return True


class MiniGridVecEnv(GymVecEnv):
    """``minigrid:<Id>``: a MiniGrid task with one-hot views (``OneHotView``), discrete actions, cut
    episodes' final views reported."""

    final_observations = True

    def _factory(self, env_id: str) -> Callable[..., gymnasium.Env]:
        full = minigrid_id(env_id)

        def make(fast_view: bool = True, **kw: Any) -> gymnasium.Env:
            if not isinstance(fast_view, (bool, np.bool_)):
                raise ValueError(f"minigrid: the option fast_view takes true or false, got {fast_view!r}")
            env = gymnasium.make(full, **kw)
            if fast_view:
                use_fast_view(env)
            return OneHotView(env)

        return make
