"""DeepMind Lab envs in a process of their own: the engine side of ``r2ac.envs.dmlab``.

This file imports nothing from r2ac (only numpy and the ``deepmind_lab`` module), so that the worker
process starts fast: ``r2ac.envs.dmlab`` runs it as a script, ``python dmlab_worker.py FD``, with one end
of a socket pair as file descriptor FD. DeepMind Lab ends the whole process (exit code 1, no Python
exception) when a level's map is missing (the natlab_* levels of a build from the public sources);
here that ends only this worker, and the parent turns it into one error line.

``LabGroup`` is also what runs in-process (``process=False``): the same reset/step code either way.

Protocol (``multiprocessing.connection.Connection`` over the socket): the parent sends one pickled
settings dict, the worker answers ``b"K"`` (ready) or ``b"E"`` + a pickled message; then per call the parent
sends ``b"R"`` (reset) or ``b"S" + actions as int64 bytes`` (step) or ``b"C"`` (close) and the worker
answers with raw bytes: rewards (float32 x n) + done flags (uint8 x n) + observations (uint8, n x 3 x H x W),
or ``b"E"`` + a pickled message (``b"K"`` after a close).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pickle
import shutil
import sys
import tempfile
import types
from typing import Any

import numpy as np

# IMPALA's action set (Espeholt et al. 2018) over DMLab's 7 action dimensions (look left/right pixels,
# look down/up pixels, strafe left/right, move back/forward, fire, jump, crouch).
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

# Tests point the worker at a fake engine module with this variable (and PYTHONPATH).
MODULE_ENV_VAR = "R2AC_DMLAB_MODULE"


def load_engine_module(name: str | None = None):
    """Import the DeepMind Lab module (``deepmind_lab`` unless ``R2AC_DMLAB_MODULE`` names another).

    DeepMind Lab's ``__init__`` calls ``pkg_resources.resource_filename`` once, to find its
    ``deepmind_lab.so``; setuptools >= 81 no longer ships ``pkg_resources``. When it is missing, a
    stand-in that answers only that call is placed in ``sys.modules`` for the import and removed after.
    """
    name = name or os.environ.get(MODULE_ENV_VAR) or "deepmind_lab"
    if name in sys.modules and sys.modules[name] is not None:
        return sys.modules[name]
    stand_in = None
    if name == "deepmind_lab" and "pkg_resources" not in sys.modules \
            and importlib.util.find_spec("pkg_resources") is None:
        stand_in = types.ModuleType("pkg_resources")

        def resource_filename(package: str, resource: str) -> str:
            spec = importlib.util.find_spec(package)
            if spec is None or spec.origin is None:
                raise ImportError(f"cannot locate package {package!r}")
            return os.path.join(os.path.dirname(spec.origin), resource)

        stand_in.resource_filename = resource_filename
        sys.modules["pkg_resources"] = stand_in
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # deepmind_lab imports `imp`
            return importlib.import_module(name)
    finally:
        if stand_in is not None and sys.modules.get("pkg_resources") is stand_in:
            del sys.modules["pkg_resources"]


class DirectoryLevelCache:
    """DeepMind Lab's level cache protocol (``fetch``/``write``) over a directory.

    Levels that build their map at reset (explore_*, rooms_keys_doors_puzzle, ...) compile it with
    q3map2/bspc, seconds per map; the cache keeps the compiled .pk3 files by key, so a map seen before
    is copied instead. Writes go to a temporary file and are renamed into place, so several worker
    processes may share one directory.
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(os.path.expanduser(path))
        os.makedirs(self.path, exist_ok=True)

    def fetch(self, key: str, pk3_path: str) -> bool:
        src = os.path.join(self.path, key)
        if not os.path.isfile(src):
            return False
        shutil.copyfile(src, pk3_path)
        return True

    def write(self, key: str, pk3_path: str) -> None:
        dst = os.path.join(self.path, key)
        if os.path.exists(dst):
            return
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".tmp-")
        os.close(fd)
        try:
            shutil.copyfile(pk3_path, tmp)
            os.replace(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


class LabGroup:
    """``n`` DeepMind Lab instances of one level, reset and stepped in order.

    Env ``i`` draws its episode seeds from ``np.random.default_rng(seed_entropy[i])``, so a run is
    reproducible whichever way the envs are split across worker processes.
    """

    def __init__(self, module: Any, level_path: str, seed_entropy: list, *, config: dict,
                 renderer: str, action_repeat: int, level_cache: Any = None,
                 runfiles_path: str | None = None) -> None:
        if runfiles_path:
            module.set_runfiles_path(runfiles_path)
        if isinstance(level_cache, str):
            level_cache = DirectoryLevelCache(level_cache)
        kwargs: dict[str, Any] = {"config": config, "renderer": renderer}
        if level_cache is not None:
            kwargs["level_cache"] = level_cache
        self.height, self.width = int(config["height"]), int(config["width"])
        self.action_repeat = action_repeat
        self.rngs = [np.random.default_rng(e) for e in seed_entropy]
        self.labs: list[Any] = []
        for _ in seed_entropy:
            self.labs.append(module.Lab(level_path, ["RGB_INTERLEAVED"], **kwargs))

    @property
    def n(self) -> int:
        return len(self.labs)

    def _reset_one(self, i: int) -> None:
        self.labs[i].reset(seed=int(self.rngs[i].integers(0, 2**31 - 1)))

    def _frame(self, i: int, out: np.ndarray) -> None:
        frame = np.asarray(self.labs[i].observations()["RGB_INTERLEAVED"])
        if frame.shape != (self.height, self.width, 3):
            raise RuntimeError(f"DMLab returned a frame of shape {frame.shape}, expected "
                               f"{(self.height, self.width, 3)}")
        out[:] = frame.transpose(2, 0, 1)

    def reset(self, obs: np.ndarray) -> None:
        for i in range(self.n):
            self._reset_one(i)
            self._frame(i, obs[i])

    def step(self, actions: np.ndarray, obs: np.ndarray, reward: np.ndarray, done: np.ndarray) -> None:
        for i, lab in enumerate(self.labs):
            reward[i] = lab.step(DMLAB_ACTION_SET[actions[i]], num_steps=self.action_repeat)
            done[i] = not lab.is_running()
            if done[i]:
                self._reset_one(i)
            self._frame(i, obs[i])

    def close(self) -> None:
        for lab in self.labs:
            lab.close()
        self.labs = []


def _serve(conn) -> int:
    settings = pickle.loads(conn.recv_bytes())
    try:
        module = load_engine_module()
        group = LabGroup(module, settings["level_path"], settings["seed_entropy"], config=settings["config"],
                         renderer=settings["renderer"], action_repeat=settings["action_repeat"],
                         level_cache=settings.get("level_cache"), runfiles_path=settings.get("runfiles_path"))
    except Exception as exc:  # reported to the parent, which raises it there
        conn.send_bytes(b"E" + pickle.dumps(f"{type(exc).__name__}: {exc}"))
        return 1
    conn.send_bytes(b"K")
    n, h, w = group.n, group.height, group.width
    buf = bytearray(5 * n + 3 * h * w * n)
    reward = np.frombuffer(buf, dtype=np.float32, count=n)
    done = np.frombuffer(buf, dtype=np.uint8, count=n, offset=4 * n)
    obs = np.frombuffer(buf, dtype=np.uint8, offset=5 * n).reshape(n, 3, h, w)
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):  # the parent went away
            break
        op = msg[:1]
        try:
            if op == b"S":
                actions = np.frombuffer(msg, dtype=np.int64, offset=1)
                group.step(actions, obs, reward, done.view(bool))
            elif op == b"R":
                reward[:] = 0
                done[:] = 0
                group.reset(obs)
            elif op == b"C":
                group.close()
                conn.send_bytes(b"K")
                break
            else:
                raise RuntimeError(f"unknown request {op!r}")
        except Exception as exc:
            conn.send_bytes(b"E" + pickle.dumps(f"{type(exc).__name__}: {exc}"))
            return 1
        conn.send_bytes(bytes(buf))
    return 0


def main(argv: list[str]) -> int:
    import socket
    from multiprocessing.connection import Connection

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # no r2ac/envs modules by name
    fd = int(argv[1])
    sock = socket.socket(fileno=fd)
    conn = Connection(sock.detach())
    return _serve(conn)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
