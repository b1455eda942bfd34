"""DeepMind Lab adapter: ``dmlab:<level>``, tested against the real engine (``make dmlab``).

Per env one ``deepmind_lab.Lab(level, ['RGB_INTERLEAVED'], config={'width': '96', 'height': '72'})``
(Irie et al. 2024, Table 4: 96x72 RGB, no frame stack); one agent step is ``lab.step(ACTION_SET[a],
num_steps=action_repeat)`` (action repeat 4; the reward is the sum over the repeated frames); the
episode ends when ``lab.is_running()`` turns False and the env is then reset at once (same-step
autoreset). Observation: ``RGB_INTERLEAVED`` (H, W, 3) -> (3, 72, 96) uint8. Env ``i`` draws its
episode seeds (``lab.reset(seed=...)``) from its own generator, ``np.random.default_rng([seed, i])``.

Actions: IMPALA's 9-action set (Espeholt et al. 2018) over DMLab's 7 action dimensions
``[LOOK_LEFT_RIGHT_PIXELS_PER_FRAME, LOOK_DOWN_UP_PIXELS_PER_FRAME, STRAFE_LEFT_RIGHT,
MOVE_BACK_FORWARD, FIRE, JUMP, CROUCH]`` (see ``DMLAB_ACTION_SET``).

Isolation: by default (``process=True``) the envs run in ``workers`` child processes
(``r2ac/envs/dmlab_worker.py``), stepped in parallel. DeepMind Lab exits the whole process when a level's
map is missing (the natlab_* levels of a build from the public sources): in a child that ends only the
child, and this side raises ``DMLabError`` with one line naming the level and the missing asset, so an
actor or the trainer is never taken down (the runtimes recreate an actor's envs after an env error).
``process=False`` runs the engine in this process (used by the fake-API tests).

Level cache: ``level_cache`` = a directory (any mode: compiled maps are kept there as .pk3 files and
shared between processes) or an object with DeepMind Lab's ``fetch``/``write`` methods (in-process only).
"""

from __future__ import annotations

import collections
import os
import pickle
import re
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions
from r2ac.envs.dmlab_worker import DMLAB_ACTION_NAMES, DMLAB_ACTION_SET, LabGroup, load_engine_module

__all__ = ["DMLAB30_LEVELS", "DMLAB_ACTION_NAMES", "DMLAB_ACTION_SET", "DMLabError", "DMLabVecEnv",
           "DMLAB_MISSING_MESSAGE", "dmlab_level_path", "import_deepmind_lab"]

# The 30 DMLab-30 levels (their game scripts live under contributed/dmlab30/; the train/test pairs are
# listed both ways).
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
    "It has no release on PyPI: install a wheel built from source with `make dmlab DMLAB_WHEEL=path/to/"
    "deepmind_lab-1.0-py3-none-any.whl`, or build one with `make dmlab` (tools/build_dmlab.sh: Bazel, "
    "Debian's system libraries, sources at pinned commits; about 10 minutes on 2 cores), or use the wheel "
    "image docker/dmlab.Dockerfile (see docs/environments.md, section DeepMind Lab)."
)

_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dmlab_worker.py")
_MISSING_MAP = re.compile(r"Didn't find map '([^']+)'")


class DMLabError(RuntimeError):
    """A DeepMind Lab worker failed (e.g. a level whose assets are missing); the message is one line."""


def import_deepmind_lab():
    """Import the ``deepmind_lab`` module or raise an ImportError that says how to get it."""
    try:
        return load_engine_module()
    except ImportError as exc:
        raise ImportError(DMLAB_MISSING_MESSAGE) from exc


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


def _engine_available() -> bool:
    """Whether the worker can import the engine module, checked here without importing it."""
    import importlib.util

    from r2ac.envs.dmlab_worker import MODULE_ENV_VAR

    name = os.environ.get(MODULE_ENV_VAR) or "deepmind_lab"
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class _Worker:
    """One child process running a ``LabGroup`` of ``n`` envs (see r2ac/envs/dmlab_worker.py)."""

    def __init__(self, level: str, settings: dict, n: int, obs_shape: tuple) -> None:
        self.level, self.n, self.obs_shape = level, n, obs_shape
        self.nbytes = 5 * n + n * int(np.prod(obs_shape))
        parent_sock, child_sock = socket.socketpair()
        self.log: collections.deque = collections.deque(maxlen=400)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", _WORKER_SCRIPT, str(child_sock.fileno())],
                pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=False)
        finally:
            child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self._reader = threading.Thread(target=self._drain, name="dmlab-worker-log", daemon=True)
        self._reader.start()
        self.conn.send_bytes(pickle.dumps(settings))
        self._expect_ok("starting")

    def _drain(self) -> None:
        """Keep the last lines the engine printed (it warns about every missing texture: do not echo)."""
        for raw in iter(self.proc.stdout.readline, b""):
            self.log.append(raw.decode("utf-8", "replace").rstrip())
        self.proc.stdout.close()

    def _died(self, during: str) -> DMLabError:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=5)
        lines = [ln for ln in self.log if ln.strip()]
        for ln in reversed(lines):
            m = _MISSING_MAP.search(ln)
            if m:
                return DMLabError(
                    f"DMLab level {self.level!r} cannot load: its map {m.group(1)!r} is missing from this "
                    f"DeepMind Lab build (the engine printed \"Didn't find map '{m.group(1)}'\" and exited "
                    f"with code {code}); the public sources lack the natlab_* maps: use another level or a "
                    "build with the full assets")
        last = lines[-1] if lines else "(no output)"
        return DMLabError(f"DMLab level {self.level!r}: the engine process exited with code {code} while "
                          f"{during}; its last output line: {last}")

    def _recv(self, during: str) -> bytes:
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError, ConnectionError):
            raise self._died(during) from None
        if data[:1] == b"E":
            raise DMLabError(f"DMLab level {self.level!r} failed while {during}: {pickle.loads(data[1:])}")
        return data

    def _expect_ok(self, during: str) -> None:
        data = self._recv(during)
        if data != b"K":
            raise DMLabError(f"DMLab level {self.level!r}: unexpected worker reply while {during}")

    def send(self, msg: bytes, during: str) -> None:
        try:
            self.conn.send_bytes(msg)
        except (OSError, ConnectionError):
            raise self._died(during) from None

    def receive_into(self, during: str, obs: np.ndarray, reward: np.ndarray, done: np.ndarray) -> None:
        data = self._recv(during)
        if len(data) != self.nbytes:
            raise DMLabError(f"DMLab level {self.level!r}: worker sent {len(data)} bytes, expected {self.nbytes}")
        n = self.n
        reward[:] = np.frombuffer(data, np.float32, n)
        done[:] = np.frombuffer(data, np.uint8, n, 4 * n).astype(bool)
        obs[:] = np.frombuffer(data, np.uint8, offset=5 * n).reshape(n, *self.obs_shape)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.conn.send_bytes(b"C")
                self._expect_ok("closing")
            except (DMLabError, OSError, EOFError):  # a worker that is dying or dead closes its pipe first
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.conn.close()


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
                 runfiles_path: str | None = None,
                 process: bool = True,
                 workers: int = 1) -> None:
        self.level = level
        self.level_path = dmlab_level_path(level)
        self.num_envs = _pos_int("num_envs", num_envs)
        width, height = _pos_int("width", width), _pos_int("height", height)
        self.action_repeat = _pos_int("action_repeat", action_repeat)
        workers = _pos_int("workers", workers)
        if renderer not in ("software", "hardware"):
            raise ValueError(f"option 'renderer' must be 'software' or 'hardware', got {renderer!r}")
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"option 'config' must be a mapping of DMLab settings, got {config!r}")
        if not isinstance(process, bool):
            raise ValueError(f"option 'process' must be true or false, got {process!r}")
        if process and level_cache is not None and not isinstance(level_cache, (str, os.PathLike)):
            raise ValueError("option 'level_cache' must be a directory path when process=true (envs run in "
                             "worker processes); a cache object works only with process=false")
        # at most one worker per env: a config's workers=2 also serves the 1-env venvs built to export a stem
        # or to evaluate (r2ac.runtime.pipeline.export_run_stem)
        workers = min(workers, self.num_envs)
        lab_config = {str(k): str(v) for k, v in (config or {}).items()}
        lab_config.update({"width": str(width), "height": str(height)})
        lab_config.setdefault("logLevel", "WARN")
        self.observation_shape = (3, height, width)
        self.lab_config = lab_config
        if isinstance(level_cache, os.PathLike):
            level_cache = os.fspath(level_cache)
        entropy = [[int(seed) & 0xFFFFFFFF, i] for i in range(self.num_envs)]  # env i: default_rng([seed, i])
        self.tracker = EpisodeTracker(self.num_envs)
        self._needs_reset = True
        self._group: LabGroup | None = None
        self._workers: list[_Worker] = []
        self._slices: list[slice] = []
        if not process:
            self._group = LabGroup(import_deepmind_lab(), self.level_path, entropy, config=lab_config,
                                   renderer=renderer, action_repeat=self.action_repeat,
                                   level_cache=level_cache, runfiles_path=runfiles_path)
            return
        if not _engine_available():
            raise ImportError(DMLAB_MISSING_MESSAGE, name="deepmind_lab")
        bounds = np.linspace(0, self.num_envs, workers + 1).round().astype(int)
        try:
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                settings = {"level_path": self.level_path, "seed_entropy": entropy[lo:hi], "config": lab_config,
                            "renderer": renderer, "action_repeat": self.action_repeat,
                            "level_cache": level_cache, "runfiles_path": runfiles_path}
                self._workers.append(_Worker(level, settings, int(hi - lo), self.observation_shape))
                self._slices.append(slice(int(lo), int(hi)))
        except BaseException:
            self.close()
            raise

    def reset(self) -> np.ndarray:
        obs = np.empty((self.num_envs, *self.observation_shape), dtype=np.uint8)
        if self._group is not None:
            self._group.reset(obs)
        else:
            self._exchange(b"R", "resetting", obs, np.zeros(self.num_envs, np.float32),
                           np.zeros(self.num_envs, bool))
        self.tracker.reset()
        self._needs_reset = False
        return obs

    def _exchange(self, head: bytes, during: str, obs: np.ndarray, reward: np.ndarray, done: np.ndarray,
                  actions: np.ndarray | None = None) -> None:
        for w, sl in zip(self._workers, self._slices):
            w.send(head if actions is None else head + actions[sl].tobytes(), during)
        for w, sl in zip(self._workers, self._slices):
            w.receive_into(during, obs[sl], reward[sl], done[sl])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        obs = np.empty((self.num_envs, *self.observation_shape), dtype=np.uint8)
        reward = np.zeros(self.num_envs, dtype=np.float32)
        done = np.zeros(self.num_envs, dtype=bool)
        if self._group is not None:
            self._group.step(actions, obs, reward, done)
        else:
            self._exchange(b"S", "stepping", obs, reward, done, np.ascontiguousarray(actions, dtype=np.int64))
        info = self.tracker.update(reward, done)
        return obs, reward, done, info

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
            self._group = None
        for w in self._workers:
            w.close()
        self._workers, self._slices = [], []
