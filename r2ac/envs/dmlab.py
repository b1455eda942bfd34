"""DeepMind Lab adapter over the ``deepmind_lab`` module's documented Python API.

Per env one ``deepmind_lab.Lab(level, ['RGB_INTERLEAVED'], config={'width': '96', 'height': '72'})``;
``lab.reset(seed=...)`` with seeds from a ``np.random.Generator(seed)``; one agent step is
``lab.step(ACTION_SET[a], num_steps=action_repeat)`` (action repeat 4, the reward is the sum over
the repeated frames); the episode ends when ``lab.is_running()`` turns False, and the env is then
reset at once (same-step autoreset). Observation: ``RGB_INTERLEAVED`` (H, W, 3) -> (3, 72, 96) uint8.

Actions: IMPALA's 9-action set (Espeholt et al. 2018) over DMLab's 7 action dimensions
``[LOOK_LEFT_RIGHT_PIXELS_PER_FRAME, LOOK_DOWN_UP_PIXELS_PER_FRAME, STRAFE_LEFT_RIGHT,
MOVE_BACK_FORWARD, FIRE, JUMP, CROUCH]`` (see ``DMLAB_ACTION_SET``).

DeepMind Lab has no pip wheel (certainly none for Python 3.11) and cannot be installed on the
project's development machines; it is built from source with Bazel in the project's Docker image
(``docker/``). Here the adapter is tested against a fake module implementing the same API.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions

__all__ = ["DMLAB30_LEVELS", "DMLAB_ACTION_NAMES", "DMLAB_ACTION_SET", "DMLabVecEnv",
           "DMLAB_MISSING_MESSAGE", "dmlab_level_path", "import_deepmind_lab"]

# IMPALA's action set: (look left/right, look down/up, strafe left/right, back/forward, fire, jump, crouch)
DMLAB_ACTION_NAMES = (
    "forward", "backward", "strafe_left", "strafe_right", "look_left", "look_right",
    "forward_look_left", "forward_look_right", "fire",
)
DMLAB_ACTION_SET = np.array([
    [0, 0, 0, 1, 0, 0, 0],     # forward
    [0, 0, 0, -1, 0, 0, 0],    # backward
    [0, 0, -1, 0, 0, 0, 0],    # strafe left
    [0, 0, 1, 0, 0, 0, 0],     # strafe right
    [-20, 0, 0, 0, 0, 0, 0],   # look left
    [20, 0, 0, 0, 0, 0, 0],    # look right
    [-20, 0, 0, 1, 0, 0, 0],   # forward + look left
    [20, 0, 0, 1, 0, 0, 0],    # forward + look right
    [0, 0, 0, 0, 1, 0, 0],     # fire
], dtype=np.intc)

# The 30 DMLab-30 levels (their game scripts live under contributed/dmlab30/).
DMLAB30_LEVELS = (
    "rooms_collect_good_objects_train", "rooms_collect_good_objects_test",
    "rooms_exploit_deferred_effects_train", "rooms_exploit_deferred_effects_test",
    "rooms_select_nonmatching_object", "rooms_watermaze", "rooms_keys_doors_puzzle",
    "language_select_described_object", "language_select_located_object",
    "language_execute_random_task", "language_answer_quantitative_question",
    "lasertag_one_opponent_small", "lasertag_three_opponents_small",
    "lasertag_one_opponent_large", "lasertag_three_opponents_large",
    "natlab_fixed_large_map", "natlab_varying_map_regrowth", "natlab_varying_map_randomized",
    "skymaze_irreversible_path_hard", "skymaze_irreversible_path_varied",
    "psychlab_arbitrary_visuomotor_mapping", "psychlab_continuous_recognition",
    "psychlab_sequential_comparison", "psychlab_visual_search",
    "explore_object_locations_small", "explore_object_locations_large",
    "explore_obstructed_goals_small", "explore_obstructed_goals_large",
    "explore_goal_locations_small", "explore_goal_locations_large",
    "explore_object_rewards_few", "explore_object_rewards_many",
)

DMLAB_MISSING_MESSAGE = (
    "DeepMind Lab is not available: the Python module 'deepmind_lab' could not be imported. "
    "DeepMind Lab has no pip wheel (none for Python 3.11), so it cannot be pip-installed here; "
    "the project's Docker setup builds it from source with Bazel: "
    "`docker compose -f docker/docker-compose.yml --profile build build dmlab-wheel` builds the wheel "
    "image (docker/dmlab.Dockerfile), `docker compose -f docker/docker-compose.yml build` builds the "
    "actor/learner images that install it, and r2ac runs with DMLab inside those containers "
    "(see docs/environments.md). To build it on a host yourself, follow "
    "https://github.com/google-deepmind/lab/blob/master/docs/users/build.md and pip-install the wheel "
    "that python/pip_package/build_pip_package produces."
)


def import_deepmind_lab():
    """Import the ``deepmind_lab`` module or raise an ImportError that says how to get it."""
    try:
        import deepmind_lab
    except ImportError as exc:
        raise ImportError(DMLAB_MISSING_MESSAGE) from exc
    return deepmind_lab


def dmlab_level_path(level: str) -> str:
    """DMLab-30 name -> ``contributed/dmlab30/<name>``; a path with '/' is used as given."""
    if "/" in level:
        return level
    if level in DMLAB30_LEVELS:
        return f"contributed/dmlab30/{level}"
    raise ValueError(
        f"unknown DMLab level {level!r}: use a DMLab-30 level name ({', '.join(DMLAB30_LEVELS)}) "
        "or a game-script path containing '/', e.g. 'dmlab:contributed/dmlab30/rooms_watermaze'")


def _pos_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"option {name!r} must be an integer >= 1, got {value!r}")
    return int(value)


class DMLabVecEnv(VecEnv):
    """``dmlab:<level>``: (3, 72, 96) uint8 RGB, IMPALA's 9 actions, action repeat 4."""

    observation_dtype = np.uint8
    num_actions = len(DMLAB_ACTION_SET)

    def __init__(self, level: str, num_envs: int, seed: int, *,
                 width: int = 96,
                 height: int = 72,
                 action_repeat: int = 4,
                 renderer: str = "software",
                 config: dict | None = None,
                 level_cache: Any = None,
                 runfiles_path: str | None = None) -> None:
        self.level = level
        self.level_path = dmlab_level_path(level)
        self.num_envs = _pos_int("num_envs", num_envs)
        width, height = _pos_int("width", width), _pos_int("height", height)
        self.action_repeat = _pos_int("action_repeat", action_repeat)
        if renderer not in ("software", "hardware"):
            raise ValueError(f"option 'renderer' must be 'software' or 'hardware', got {renderer!r}")
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"option 'config' must be a mapping of DMLab settings, got {config!r}")
        lab_config = {str(k): str(v) for k, v in (config or {}).items()}
        lab_config.update({"width": str(width), "height": str(height)})
        lab_config.setdefault("logLevel", "WARN")
        self.observation_shape = (3, height, width)
        self.lab_config = lab_config

        deepmind_lab = import_deepmind_lab()
        if runfiles_path:
            deepmind_lab.set_runfiles_path(runfiles_path)
        kwargs: dict[str, Any] = {"config": lab_config, "renderer": renderer}
        if level_cache is not None:
            kwargs["level_cache"] = level_cache
        self._labs = [deepmind_lab.Lab(self.level_path, ["RGB_INTERLEAVED"], **kwargs)
                      for _ in range(self.num_envs)]
        self.rng = np.random.default_rng(seed)
        self.tracker = EpisodeTracker(self.num_envs)
        self._needs_reset = True

    def _reset_one(self, lab: Any) -> None:
        lab.reset(seed=int(self.rng.integers(0, 2**31 - 1)))

    def _frame(self, lab: Any) -> np.ndarray:
        frame = np.asarray(lab.observations()["RGB_INTERLEAVED"])
        if frame.shape != (self.observation_shape[1], self.observation_shape[2], 3):
            raise RuntimeError(f"DMLab returned a frame of shape {frame.shape}, expected "
                               f"{(self.observation_shape[1], self.observation_shape[2], 3)}")
        return frame.transpose(2, 0, 1)

    def reset(self) -> np.ndarray:
        obs = np.empty((self.num_envs, *self.observation_shape), dtype=np.uint8)
        for b, lab in enumerate(self._labs):
            self._reset_one(lab)
            obs[b] = self._frame(lab)
        self.tracker.reset()
        self._needs_reset = False
        return obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        obs = np.empty((self.num_envs, *self.observation_shape), dtype=np.uint8)
        reward = np.zeros(self.num_envs, dtype=np.float32)
        done = np.zeros(self.num_envs, dtype=bool)
        for b, lab in enumerate(self._labs):
            reward[b] = lab.step(DMLAB_ACTION_SET[actions[b]], num_steps=self.action_repeat)
            if not lab.is_running():
                done[b] = True
                self._reset_one(lab)
            obs[b] = self._frame(lab)
        info = self.tracker.update(reward, done)
        return obs, reward, done, info

    def close(self) -> None:
        for lab in self._labs:
            lab.close()
        self._labs = []
