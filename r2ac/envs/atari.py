"""Atari 2600 through ale-py's native C++ vector env (``ale_py.vector_env.AtariVectorEnv``).

The preprocessing is the usual DQN/IMPALA one, done inside ALE's C++ threads: action repeat
``frame_skip`` (4) with a max-pool over the last two frames, greyscale, resize to 84x84, a stack of
the last ``frame_stack`` (4) frames -> observation ``(4, 84, 84)`` uint8 (oldest frame first; after a
reset the older slots of the stack are zero), up to ``noop_max`` (30) random no-op steps at the start
of every episode, FIRE at reset for games that need it (``fire_reset``), minimal action set.
Rewards are raw (unclipped). ``repeat_action_probability`` defaults to 0.0 (no sticky actions, as in
IMPALA and the R2AC paper's Atari runs); set 0.25 for the Machado et al. (2018) protocol.

Episodes end at game over or at ``max_episode_frames`` emulator frames (108000 = 30 minutes; a
truncation). With ``episodic_life`` a life loss also ends the agent's episode (``done``) while the
game goes on (the DQN convention); ``info["game_over"]`` then marks the real ends and
``info["game_return"]`` holds the whole game's return there (NaN elsewhere).

Measured on the 2-core development machine (docs/environments.md), the native vector env steps
~1.7x faster than the cheapest Python loop over gymnasium ALE envs with the same preprocessing
(``r2ac.bench.envs.bench_ale_python_loop``), so it is the only backend.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions

__all__ = ["AtariVecEnv", "atari_rom_id"]


def _import_ale():
    try:
        import ale_py
        from ale_py.vector_env import AtariVectorEnv
    except ImportError as exc:  # pragma: no cover - the dev install has it
        raise ImportError(
            "Atari envs need ale-py (with its ROMs): pip install 'ale-py>=0.10' "
            "or install r2ac with the 'atari' extra: pip install -e '.[atari]'") from exc
    return ale_py, AtariVectorEnv


def atari_rom_id(game: str) -> str:
    """``"MsPacman"`` / ``"ms_pacman"`` / ``"ALE/MsPacman-v5"`` -> ALE's ROM id ``"ms_pacman"``."""
    name = game.strip()
    if name.startswith("ALE/"):
        name = name[4:]
    name = re.sub(r"-v\d+$", "", name)
    if name.lower().endswith("noframeskip"):
        name = name[: -len("noframeskip")]
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return snake


def _validate(name: str, value: Any, kind: type, minimum: float | None = None,
              maximum: float | None = None) -> Any:
    if kind is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"option {name!r} must be true or false, got {value!r}")
        return bool(value)
    if kind is int and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
        raise ValueError(f"option {name!r} must be an integer, got {value!r}")
    if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))):
        raise ValueError(f"option {name!r} must be a number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"option {name!r} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"option {name!r} must be <= {maximum}, got {value}")
    return kind(value)


class AtariVecEnv(VecEnv):
    """``atari:<Game>``: ALE vector env, 84x84 grey, action repeat 4 (max-pooled), 4-frame stack."""

    observation_dtype = np.uint8

    def __init__(self, game: str, num_envs: int, seed: int, *,
                 repeat_action_probability: float = 0.0,
                 frame_skip: int = 4,
                 frame_stack: int = 4,
                 noop_max: int = 30,
                 episodic_life: bool = False,
                 full_action_space: bool = False,
                 fire_reset: bool = True,
                 max_episode_frames: int = 108_000,
                 screen_size: int = 84,
                 num_threads: int = 0) -> None:
        ale_py, AtariVectorEnv = _import_ale()
        from ale_py import roms

        rom = atari_rom_id(game)
        available = sorted(roms.get_all_rom_ids())
        if rom not in available:
            raise ValueError(
                f"unknown Atari game {game!r} (ROM id {rom!r}); ale-py {ale_py.__version__} has: "
                + ", ".join(available))
        self.game = rom
        self.num_envs = _validate("num_envs", num_envs, int, 1)
        self.repeat_action_probability = _validate(
            "repeat_action_probability", repeat_action_probability, float, 0.0, 1.0)
        self.frame_skip = _validate("frame_skip", frame_skip, int, 1)
        self.frame_stack = _validate("frame_stack", frame_stack, int, 1)
        self.noop_max = _validate("noop_max", noop_max, int, 0)
        self.episodic_life = _validate("episodic_life", episodic_life, bool)
        full_action_space = _validate("full_action_space", full_action_space, bool)
        fire_reset = _validate("fire_reset", fire_reset, bool)
        max_episode_frames = _validate("max_episode_frames", max_episode_frames, int, 1)
        screen_size = _validate("screen_size", screen_size, int, 8)
        num_threads = _validate("num_threads", num_threads, int, 0)
        self.seed = int(seed)

        self._env = AtariVectorEnv(
            rom, self.num_envs,
            num_threads=num_threads,
            max_num_frames_per_episode=max_episode_frames,
            repeat_action_probability=self.repeat_action_probability,
            full_action_space=full_action_space,
            autoreset_mode="SameStep",
            img_height=screen_size, img_width=screen_size, grayscale=True,
            stack_num=self.frame_stack, frameskip=self.frame_skip, maxpool=True,
            noop_max=self.noop_max,
            # ALE's own `episodic_life` restarts the whole game on a life loss; `life_loss_info`
            # ends the agent's episode and lets the game go on (the DQN convention we want).
            episodic_life=False, life_loss_info=self.episodic_life,
            reward_clipping=False,
            use_fire_reset=fire_reset,
        )
        self.observation_shape = (self.frame_stack, screen_size, screen_size)
        self.num_actions = int(self._env.single_action_space.n)
        self.tracker = EpisodeTracker(self.num_envs)
        self.game_tracker = EpisodeTracker(self.num_envs)
        self._lives = np.zeros(self.num_envs, dtype=np.int64)
        self._reset_count = 0
        self._needs_reset = True
        self._closed = False

    def reset(self) -> np.ndarray:
        # ALE seeds env b with seed + b; later resets use distinct, still deterministic seeds.
        seed = self.seed + self._reset_count * self.num_envs
        self._reset_count += 1
        obs, info = self._env.reset(seed=seed)
        self._lives = np.asarray(info["lives"], dtype=np.int64)
        self.tracker.reset()
        self.game_tracker.reset()
        self._needs_reset = False
        return np.asarray(obs)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        obs, reward, terminated, truncated, ale_info = self._env.step(actions)
        reward = np.asarray(reward, dtype=np.float32)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        done = terminated | truncated
        lives = np.asarray(ale_info["lives"], dtype=np.int64)
        info = self.tracker.update(reward, done)
        info["truncated"] = truncated
        info["lives"] = lives
        info["episode_frame_number"] = np.asarray(ale_info["episode_frame_number"], dtype=np.int64)
        if self.episodic_life:
            # A life loss keeps the game running (lives went down); a game over resets it.
            game_over = truncated | (terminated & (lives >= self._lives))
            game = self.game_tracker.update(reward, game_over)
            info["game_over"] = game_over
            info["game_return"] = game["episode_return"]
        self._lives = lives
        return np.asarray(obs), reward, done, info

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()
