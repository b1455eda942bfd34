"""ProcGen through procgen's own C++ vector env (``procgen.ProcgenGym3Env``, the env behind
``procgen.ProcgenEnv``).

Observation ``(3, 64, 64)`` uint8 RGB, 15 actions, no action repeat, no frame stack; defaults follow
the R2AC paper (Table 4): ``distribution_mode="hard"``, ``num_levels=500``, ``start_level=0``.
procgen's gym3 interface already autoresets on the same step: after ``act``, ``observe`` returns the
reward of that action, ``first`` (= the episode ended with it, including procgen's own time limits)
and the next episode's first frame.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions

__all__ = ["PROCGEN_GAMES", "ProcgenVecEnv", "import_procgen"]

PROCGEN_GAMES = (
    "bigfish", "bossfight", "caveflyer", "chaser", "climber", "coinrun", "dodgeball", "fruitbot",
    "heist", "jumper", "leaper", "maze", "miner", "ninja", "plunder", "starpilot",
)
_DISTRIBUTION_MODES = ("easy", "hard", "extreme", "memory", "exploration")


def import_procgen():
    """Import procgen (which imports the legacy ``gym`` package and prints its notice: silenced)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import procgen
    except ImportError as exc:
        raise ImportError(
            "ProcGen envs need procgen: pip install procgen-mirror 'numpy<2' "
            "or install r2ac with the 'procgen' extra: pip install -e '.[procgen]'") from exc
    return procgen


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"option {name!r} must be true or false, got {value!r}")
    return bool(value)


def _nonneg_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"option {name!r} must be an integer >= 0, got {value!r}")
    return int(value)


class ProcgenVecEnv(VecEnv):
    """``procgen:<game>``: 64x64 RGB -> (3, 64, 64) uint8, 15 actions, no repeat."""

    observation_dtype = np.uint8
    observation_shape = (3, 64, 64)

    def __init__(self, game: str, num_envs: int, seed: int, *,
                 distribution_mode: str = "hard",
                 num_levels: int = 500,
                 start_level: int = 0,
                 use_sequential_levels: bool = False,
                 center_agent: bool = True,
                 use_backgrounds: bool = True,
                 restrict_themes: bool = False,
                 use_monochrome_assets: bool = False,
                 paint_vel_info: bool = False,
                 num_threads: int = 4) -> None:
        if game not in PROCGEN_GAMES:
            raise ValueError(f"unknown procgen game {game!r}; allowed: {', '.join(PROCGEN_GAMES)}")
        if distribution_mode not in _DISTRIBUTION_MODES:
            raise ValueError(f"option 'distribution_mode' must be one of {_DISTRIBUTION_MODES}, "
                             f"got {distribution_mode!r}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        kwargs = dict(
            distribution_mode=distribution_mode,
            start_level=_nonneg_int("start_level", start_level),
            use_sequential_levels=_flag("use_sequential_levels", use_sequential_levels),
            center_agent=_flag("center_agent", center_agent),
            use_backgrounds=_flag("use_backgrounds", use_backgrounds),
            restrict_themes=_flag("restrict_themes", restrict_themes),
            use_monochrome_assets=_flag("use_monochrome_assets", use_monochrome_assets),
            paint_vel_info=_flag("paint_vel_info", paint_vel_info),
            num_threads=_nonneg_int("num_threads", num_threads),
            rand_seed=int(seed) % 2**31,
        )
        num_levels = _nonneg_int("num_levels", num_levels)
        if distribution_mode == "exploration":  # procgen fixes the level set itself
            kwargs.pop("start_level")
        else:
            kwargs["num_levels"] = num_levels
        procgen = import_procgen()
        self.game = game
        self.num_envs = int(num_envs)
        self.num_actions = 15
        self._kwargs = kwargs
        self._procgen = procgen
        self.tracker = EpisodeTracker(self.num_envs)
        self._started = False
        self._env = procgen.ProcgenGym3Env(num=self.num_envs, env_name=game, **kwargs)

    @staticmethod
    def _frames(ob: dict) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(ob["rgb"]).transpose(0, 3, 1, 2))

    def reset(self) -> np.ndarray:
        """The first call returns the envs' fresh first frames. procgen cannot reset on demand, so
        a later call rebuilds the vector env with the next seed of a deterministic seed stream."""
        if self._env is None:
            raise RuntimeError("the env is closed")
        if self._started:
            self._env.close()
            self._kwargs["rand_seed"] = (self._kwargs["rand_seed"] + 7919) % 2**31
            self._env = self._procgen.ProcgenGym3Env(num=self.num_envs, env_name=self.game, **self._kwargs)
        self._started = True
        self.tracker.reset()
        _, ob, _ = self._env.observe()
        return self._frames(ob)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        self._env.act(actions.astype(np.int32))
        reward, ob, first = self._env.observe()
        reward = np.asarray(reward, dtype=np.float32)
        done = np.asarray(first, dtype=bool)
        info = self.tracker.update(reward, done)
        return self._frames(ob), reward, done, info

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
