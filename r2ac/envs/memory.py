"""Built-in memory tasks, vectorized in numpy: a delayed-cue T-maze and a grid watermaze.

Every env of a batch is stepped as one set of array operations (no Python loop over envs), so the
tasks run at hundreds of thousands of env steps per second on one CPU core. Observations are small
uint8 images ``(3, H, W)`` so the same image stems and trajectory format serve them and the real
benchmarks.

``tmaze`` — delayed-cue T-maze (observation ``(3, 8, 8)``, 3 actions)
    t = 0: the cue is shown: a red patch in the top-left (rows 0-1, columns 0-3, channel 0) means
    *left*, a green patch in the top-right (rows 0-1, columns 4-7, channel 1) means *right*. From
    t = 1 on the cue is never shown again. The agent then walks a corridor of ``corridor_length``
    cells; a progress bar in channel 2 (rows 4-7 read row-major, 32 cells; ``floor(32 * pos / L)``
    lit) shows how far it is, and at the junction (pos = L) rows 2-3 of channel 2 light up as well.
    Actions: 0 = forward, 1 = turn left, 2 = turn right. With ``auto_advance`` (default) the corridor
    moves the agent one cell per step whatever it does, so the decision is always the action at
    t = ``corridor_length``: the credit span from cue to decision is exactly ``corridor_length`` steps.
    Without it only *forward* advances (turns in the corridor do nothing). At the junction a turn ends
    the episode: +1 if it matches the cue, ``wrong_reward`` (default 0) otherwise; *forward* at the
    junction waits. Episodes that reach ``max_steps`` are truncated with reward 0 and count as
    failures. ``info["success"]`` is 1.0 / 0.0 at episode end (NaN elsewhere); chance is 50 %.

``watermaze`` — hidden-goal grid arena (observation ``(3, size + 2, size + 2)``, 4 or 5 actions)
    Top-down view of a ``size`` x ``size`` arena with coloured walls (north red, east green,
    south blue, west yellow, corners grey); the agent is a white cell. A goal cell, drawn nowhere,
    is drawn uniformly per episode. Actions: 0 = north, 1 = east, 2 = south, 3 = west (4 = stay with
    ``allow_stay``); moving into a wall leaves the agent in place. Stepping onto the goal gives +1
    and shows the agent in magenta on the goal for one step ("the platform rises"); the next step,
    whatever the action, respawns the agent at a uniformly random other cell of the same arena with
    the same goal. Episodes last exactly ``episode_length`` steps (a truncation). An agent that
    remembers where it found the goal returns to it in far fewer steps than it took to find it.
    End-of-episode info: ``goals_found``, ``success`` (found at least once),
    ``steps_to_first_goal`` and ``mean_steps_to_goal_after_first`` (NaN when undefined).

Both are deterministic given the seed: one ``np.random.Generator`` per vector env (or the gymnasium
``np_random`` of the single-env versions ``r2ac/TMaze-v0`` and ``r2ac/Watermaze-v0``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions, nan_where_not

__all__ = [
    "TMAZE_ACTIONS",
    "WATERMAZE_ACTIONS",
    "TMazeCore",
    "TMazeEnv",
    "TMazeVecEnv",
    "WatermazeCore",
    "WatermazeEnv",
    "WatermazeVecEnv",
]

TMAZE_ACTIONS = ("forward", "left", "right")
WATERMAZE_ACTIONS = ("north", "east", "south", "west", "stay")

_CUE_LEFT, _CUE_RIGHT = 0, 1


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"option {name!r} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"option {name!r} must be >= {minimum}, got {value}")
    return int(value)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"option {name!r} must be true or false, got {value!r}")
    return bool(value)


def _check_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"option {name!r} must be a number, got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"option {name!r} must be finite, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------------
# T-maze
# --------------------------------------------------------------------------------------------------

class TMazeCore:
    """Batched T-maze state and dynamics; the random generator is passed in by the caller."""

    height = width = 8
    progress_cells = 32  # rows 4-7 of channel 2
    num_actions = len(TMAZE_ACTIONS)

    def __init__(self, num_envs: int, *, corridor_length: int = 10, auto_advance: bool = True,
                 max_steps: int | None = None, wrong_reward: float = 0.0) -> None:
        self.num_envs = _check_int("num_envs", num_envs, 1)
        self.corridor_length = L = _check_int("corridor_length", corridor_length, 1)
        self.auto_advance = _check_bool("auto_advance", auto_advance)
        if max_steps is None:
            max_steps = L + 20 if self.auto_advance else 4 * L + 20
        self.max_steps = _check_int("max_steps", max_steps, L + 1)
        self.wrong_reward = _check_float("wrong_reward", wrong_reward)
        self.observation_shape = (3, self.height, self.width)
        # frames[shown_cue, pos]: shown_cue 0 = no cue, 1 = left, 2 = right; pos 0..L.
        self.frames = self._render_table()
        self.cue = np.zeros(self.num_envs, dtype=np.int64)   # 0 = left, 1 = right
        self.pos = np.zeros(self.num_envs, dtype=np.int64)   # cells walked, L = at the junction
        self.t = np.zeros(self.num_envs, dtype=np.int64)     # agent steps in this episode

    def _render_table(self) -> np.ndarray:
        L, n = self.corridor_length, self.progress_cells
        frames = np.zeros((3, L + 1, 3, self.height, self.width), dtype=np.uint8)
        frames[1, :, 0, 0:2, 0:4] = 255   # left cue: red, top-left
        frames[2, :, 1, 0:2, 4:8] = 255   # right cue: green, top-right
        for pos in range(L + 1):
            bar = np.zeros(n, dtype=np.uint8)
            bar[: (n * pos) // L] = 255
            frames[:, pos, 2, 4:8, :] = bar.reshape(4, 8)
        frames[:, L, 2, 2:4, :] = 255     # junction (the T's crossbar)
        return frames

    def reset_envs(self, mask: np.ndarray | None, rng: np.random.Generator) -> None:
        idx = slice(None) if mask is None else mask
        k = self.num_envs if mask is None else int(np.count_nonzero(mask))
        self.cue[idx] = rng.integers(0, 2, size=k)
        self.pos[idx] = 0
        self.t[idx] = 0

    def desync(self, rng: np.random.Generator) -> None:
        """Each env at a random cell of its corridor, as if it had walked there (``VecEnv.desync``)."""
        self.pos[:] = self.t[:] = rng.integers(0, self.corridor_length + 1, size=self.num_envs)

    def observe(self) -> np.ndarray:
        shown = np.where(self.t == 0, self.cue + 1, 0)
        return self.frames[shown, self.pos]

    def step(self, actions: np.ndarray, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        at_junction = self.pos == self.corridor_length
        turn = at_junction & (actions != 0)
        correct = turn & (actions - 1 == self.cue)
        reward = np.where(correct, 1.0, np.where(turn, self.wrong_reward, 0.0)).astype(np.float32)
        advance = ~at_junction if self.auto_advance else ~at_junction & (actions == 0)
        self.pos += advance
        self.t += 1
        terminated = turn
        truncated = ~turn & (self.t >= self.max_steps)
        return reward, terminated, truncated, {"success": correct.astype(np.float64)}


# --------------------------------------------------------------------------------------------------
# Watermaze
# --------------------------------------------------------------------------------------------------

_WALL_COLOURS = {  # RGB
    "north": (255, 0, 0), "east": (0, 255, 0), "south": (0, 0, 255), "west": (255, 255, 0),
    "corner": (128, 128, 128),
}
_AGENT_COLOUR = np.array([255, 255, 255], dtype=np.uint8)
_AGENT_ON_GOAL_COLOUR = np.array([255, 0, 255], dtype=np.uint8)
_MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1], [0, 0]], dtype=np.int64)  # N, E, S, W, stay


class WatermazeCore:
    """Batched watermaze state and dynamics; the random generator is passed in by the caller."""

    def __init__(self, num_envs: int, *, size: int = 7, episode_length: int = 100,
                 allow_stay: bool = False) -> None:
        self.num_envs = _check_int("num_envs", num_envs, 1)
        self.size = S = _check_int("size", size, 2)
        self.episode_length = _check_int("episode_length", episode_length, 1)
        self.allow_stay = _check_bool("allow_stay", allow_stay)
        self.num_actions = 5 if self.allow_stay else 4
        self.observation_shape = (3, S + 2, S + 2)
        self.background = self._render_background()
        n = self.num_envs
        self.agent = np.zeros(n, dtype=np.int64)        # flat cell index y * S + x
        self.goal = np.zeros(n, dtype=np.int64)
        self.on_goal = np.zeros(n, dtype=bool)          # standing on the revealed goal
        self.t = np.zeros(n, dtype=np.int64)
        self.found = np.zeros(n, dtype=np.int64)
        self.since_spawn = np.zeros(n, dtype=np.int64)
        self.first_find = np.full(n, np.nan)
        self.later_sum = np.zeros(n, dtype=np.int64)

    def _render_background(self) -> np.ndarray:
        S = self.size
        bg = np.zeros((3, S + 2, S + 2), dtype=np.uint8)
        bg[:, 0, :] = np.array(_WALL_COLOURS["north"], dtype=np.uint8)[:, None]
        bg[:, -1, :] = np.array(_WALL_COLOURS["south"], dtype=np.uint8)[:, None]
        bg[:, :, 0] = np.array(_WALL_COLOURS["west"], dtype=np.uint8)[:, None]
        bg[:, :, -1] = np.array(_WALL_COLOURS["east"], dtype=np.uint8)[:, None]
        for y, x in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
            bg[:, y, x] = _WALL_COLOURS["corner"]
        return bg

    def _other_cell(self, avoid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A uniformly random cell index different from ``avoid`` (elementwise)."""
        c = rng.integers(0, self.size * self.size - 1, size=avoid.shape[0])
        return c + (c >= avoid)

    def reset_envs(self, mask: np.ndarray | None, rng: np.random.Generator) -> None:
        idx = slice(None) if mask is None else mask
        k = self.num_envs if mask is None else int(np.count_nonzero(mask))
        goal = rng.integers(0, self.size * self.size, size=k)
        self.goal[idx] = goal
        self.agent[idx] = self._other_cell(goal, rng)
        self.on_goal[idx] = False
        self.t[idx] = 0
        self.found[idx] = 0
        self.since_spawn[idx] = 0
        self.first_find[idx] = np.nan
        self.later_sum[idx] = 0

    def desync(self, rng: np.random.Generator) -> None:
        """Each env at a random step of its episode (``VecEnv.desync``)."""
        self.t[:] = rng.integers(0, self.episode_length, size=self.num_envs)

    def observe(self) -> np.ndarray:
        S, n = self.size, self.num_envs
        obs = np.empty((n, *self.observation_shape), dtype=np.uint8)
        obs[:] = self.background
        y, x = np.divmod(self.agent, S)
        obs[np.arange(n), :, y + 1, x + 1] = np.where(
            self.on_goal[:, None], _AGENT_ON_GOAL_COLOUR, _AGENT_COLOUR)
        return obs

    def step(self, actions: np.ndarray, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        S = self.size
        respawn = self.on_goal
        y, x = np.divmod(self.agent, S)
        move = _MOVES[actions]
        y = np.clip(y + move[:, 0], 0, S - 1)
        x = np.clip(x + move[:, 1], 0, S - 1)
        agent = y * S + x
        if respawn.any():
            agent[respawn] = self._other_cell(self.goal[respawn], rng)
        self.agent = agent
        reached = ~respawn & (agent == self.goal)
        self.on_goal = reached
        self.since_spawn = np.where(respawn, 0, self.since_spawn + 1)
        if reached.any():
            first = reached & (self.found == 0)
            self.first_find[first] = self.since_spawn[first]
            later = reached & ~first
            self.later_sum[later] += self.since_spawn[later]
            self.found += reached
        self.t += 1
        truncated = self.t >= self.episode_length
        terminated = np.zeros(self.num_envs, dtype=bool)
        reward = reached.astype(np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_later = np.where(self.found > 1, self.later_sum / np.maximum(self.found - 1, 1), np.nan)
        info = {
            "goals_found": self.found.astype(np.float64),
            "success": (self.found > 0).astype(np.float64),
            "steps_to_first_goal": self.first_find.copy(),
            "mean_steps_to_goal_after_first": mean_later,
        }
        return reward, terminated, truncated, info


# --------------------------------------------------------------------------------------------------
# Vector envs (same-step autoreset) and single gymnasium envs
# --------------------------------------------------------------------------------------------------

class _MemoryVecEnv(VecEnv):
    observation_dtype = np.uint8
    _core_cls: type

    def __init__(self, num_envs: int, seed: int, **options: Any) -> None:
        self.core = self._core_cls(num_envs, **options)
        self.num_envs = self.core.num_envs
        self.observation_shape = self.core.observation_shape
        self.num_actions = self.core.num_actions
        self.rng = np.random.default_rng(seed)
        self.tracker = EpisodeTracker(self.num_envs)
        self._needs_reset = True

    def reset(self) -> np.ndarray:
        self.core.reset_envs(None, self.rng)
        self.tracker.reset()
        self._needs_reset = False
        return self.core.observe()

    def desync(self, rng: np.random.Generator) -> np.ndarray:
        if self._needs_reset:
            raise RuntimeError("call reset() before desync()")
        self.core.desync(rng)
        return self.core.observe()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        reward, terminated, truncated, end_info = self.core.step(actions, self.rng)
        done = terminated | truncated
        info = self.tracker.update(reward, done)
        for key, value in end_info.items():
            info[key] = nan_where_not(done, value)
        info["truncated"] = truncated
        if done.any():
            self.core.reset_envs(done, self.rng)
        return self.core.observe(), reward, done, info


class TMazeVecEnv(_MemoryVecEnv):
    """Delayed-cue T-maze (see module docstring). ``cue`` holds each env's current cue (0 left, 1 right)."""

    _core_cls = TMazeCore

    def __init__(self, num_envs: int, seed: int, *, corridor_length: int = 10, auto_advance: bool = True,
                 max_steps: int | None = None, wrong_reward: float = 0.0) -> None:
        super().__init__(num_envs, seed, corridor_length=corridor_length, auto_advance=auto_advance,
                         max_steps=max_steps, wrong_reward=wrong_reward)

    @property
    def cue(self) -> np.ndarray:
        """The current episode's cue per env (0 = left, 1 = right); for tests and diagnostics."""
        return self.core.cue.copy()


class WatermazeVecEnv(_MemoryVecEnv):
    """Hidden-goal grid watermaze (see module docstring). ``goal``/``agent`` are flat cell indices."""

    _core_cls = WatermazeCore

    def __init__(self, num_envs: int, seed: int, *, size: int = 7, episode_length: int = 100,
                 allow_stay: bool = False) -> None:
        super().__init__(num_envs, seed, size=size, episode_length=episode_length, allow_stay=allow_stay)

    @property
    def goal(self) -> np.ndarray:
        return self.core.goal.copy()

    @property
    def agent(self) -> np.ndarray:
        return self.core.agent.copy()


class _MemoryEnv(gymnasium.Env):
    """Single-env gymnasium version of a memory task (no autoreset: call ``reset`` after an episode)."""

    metadata = {"render_modes": ["rgb_array"]}
    _core_cls: type

    def __init__(self, render_mode: str | None = None, **options: Any) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.core = self._core_cls(1, **options)
        self.observation_space = gymnasium.spaces.Box(0, 255, self.core.observation_shape, np.uint8)
        self.action_space = gymnasium.spaces.Discrete(self.core.num_actions)
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.core.reset_envs(None, self.np_random)
        self._done = False
        return self.core.observe()[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._done:
            raise RuntimeError("the episode has ended: call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r} for {self.action_space}")
        reward, terminated, truncated, end_info = self.core.step(np.array([int(action)], dtype=np.int64),
                                                               self.np_random)
        term, trunc = bool(terminated[0]), bool(truncated[0])
        self._done = term or trunc
        info = {k: float(v[0]) for k, v in end_info.items()} if self._done else {}
        return self.core.observe()[0], float(reward[0]), term, trunc, info

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            return np.ascontiguousarray(self.core.observe()[0].transpose(1, 2, 0))
        return None


class TMazeEnv(_MemoryEnv):
    """``gymnasium.make("r2ac/TMaze-v0", corridor_length=..., auto_advance=..., ...)``."""

    _core_cls = TMazeCore

    def __init__(self, render_mode: str | None = None, *, corridor_length: int = 10, auto_advance: bool = True,
                 max_steps: int | None = None, wrong_reward: float = 0.0) -> None:
        super().__init__(render_mode, corridor_length=corridor_length, auto_advance=auto_advance,
                         max_steps=max_steps, wrong_reward=wrong_reward)


class WatermazeEnv(_MemoryEnv):
    """``gymnasium.make("r2ac/Watermaze-v0", size=..., episode_length=..., allow_stay=...)``."""

    _core_cls = WatermazeCore

    def __init__(self, render_mode: str | None = None, *, size: int = 7, episode_length: int = 100,
                 allow_stay: bool = False) -> None:
        super().__init__(render_mode, size=size, episode_length=episode_length, allow_stay=allow_stay)
