"""The DeepMind Lab adapter against a fake ``deepmind_lab`` module (tests/envs/dmlab_fake.py, the documented
API): runs everywhere, with or without the engine. In-process (``process=False``) the fake's Lab objects
are inspected directly; with worker processes (the default) the fake is loaded in the workers through
``R2AC_DMLAB_MODULE``. The real engine: tests/envs/test_dmlab.py."""

import os
import sys

import numpy as np
import pytest

import dmlab_fake
from r2ac.envs import make_vec_env
from r2ac.envs.dmlab import DMLAB_ACTION_SET, DMLabError

from test_envs import check_step_types

FakeLab = dmlab_fake.Lab
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def fake_dmlab(monkeypatch):
    dmlab_fake.runfiles.clear()
    FakeLab.instances = []
    monkeypatch.setitem(sys.modules, "deepmind_lab", dmlab_fake)
    return dmlab_fake


@pytest.fixture
def fake_dmlab_workers(monkeypatch):
    """Worker processes import tests/envs/dmlab_fake.py instead of deepmind_lab."""
    monkeypatch.setenv("R2AC_DMLAB_MODULE", "dmlab_fake")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))


def test_dmlab_adapter_against_fake_module(fake_dmlab):
    venv = make_vec_env("dmlab:rooms_watermaze", 3, 0, runfiles_path="/opt/lab", process=False)
    assert fake_dmlab.runfiles == ["/opt/lab"]
    labs = FakeLab.instances
    assert len(labs) == 3
    assert all(lab.level == "contributed/dmlab30/rooms_watermaze" for lab in labs)
    assert labs[0].config["width"] == "96" and labs[0].config["height"] == "72"
    assert venv.observation_shape == (3, 72, 96) and venv.num_actions == 9
    obs = venv.reset()
    assert obs.shape == (3, 3, 72, 96) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs[0, 2, :, 5], np.arange(72))       # HWC -> CHW
    assert (obs[:, 0] == 0).all()                                         # frame count 0
    for b, lab in enumerate(labs):
        assert (obs[b, 1] == lab.seed % 251).all()
    # 20 frames per episode at repeat 4: 5 agent steps; actions cycle through all 9
    ret = np.zeros(3)
    for t in range(5):
        a = (np.arange(3) + 3 * t) % 9
        obs, r, d, info = venv.step(a)
        check_step_types(venv, obs, r, d, info)
        for b, lab in enumerate(labs):
            np.testing.assert_array_equal(lab.actions[-1], DMLAB_ACTION_SET[a[b]])
            assert lab.num_steps[-1] == 4
        np.testing.assert_array_equal(r, np.where(DMLAB_ACTION_SET[a][:, 3] == 1, 4.0, 0.0))
        ret += r
        assert d.all() == (t == 4)
        if t < 4:
            assert (obs[:, 0] == 4 * (t + 1)).all()
    # episode end: reset with a new seed at once, obs is the new episode's first frame
    assert all(len(lab.seeds) == 2 and lab.seeds[0] != lab.seeds[1] for lab in labs)
    assert (obs[:, 0] == 0).all()
    for b, lab in enumerate(labs):
        assert (obs[b, 1] == lab.seed % 251).all()
    np.testing.assert_array_equal(info["episode_return"], ret)
    np.testing.assert_array_equal(info["episode_length"], 5)
    venv.close()
    assert all(lab.closed for lab in labs)


def test_dmlab_action_set_is_impalas():
    forward, backward, strafe_l, strafe_r, look_l, look_r, fwd_l, fwd_r, fire = DMLAB_ACTION_SET
    assert forward.tolist() == [0, 0, 0, 1, 0, 0, 0] and backward.tolist() == [0, 0, 0, -1, 0, 0, 0]
    assert strafe_l.tolist() == [0, 0, -1, 0, 0, 0, 0] and strafe_r.tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert look_l.tolist() == [-20, 0, 0, 0, 0, 0, 0] and look_r.tolist() == [20, 0, 0, 0, 0, 0, 0]
    assert fwd_l.tolist() == [-20, 0, 0, 1, 0, 0, 0] and fwd_r.tolist() == [20, 0, 0, 1, 0, 0, 0]
    assert fire.tolist() == [0, 0, 0, 0, 1, 0, 0]


def test_dmlab_options_and_determinism(fake_dmlab):
    venv = make_vec_env("dmlab:contributed/dmlab30/rooms_keys_doors_puzzle", 2, 7, width=32, height=24,
                        action_repeat=2, config={"allowHoldOutLevels": "true", "mixerSeed": 0x600D5EED},
                        process=False)
    lab = FakeLab.instances[0]
    assert lab.level == "contributed/dmlab30/rooms_keys_doors_puzzle"
    assert lab.config["allowHoldOutLevels"] == "true" and lab.config["mixerSeed"] == str(0x600D5EED)
    assert venv.observation_shape == (3, 24, 32)
    venv.reset()
    venv.step(np.array([0, 8]))
    assert lab.num_steps == [2]
    seeds = [lab.seeds[0] for lab in FakeLab.instances]
    assert seeds[0] != seeds[1]
    make_vec_env("dmlab:rooms_keys_doors_puzzle", 2, 7, process=False).reset()
    assert [lab.seeds[0] for lab in FakeLab.instances[2:]] == seeds
    make_vec_env("dmlab:rooms_keys_doors_puzzle", 2, 8, process=False).reset()
    assert [lab.seeds[0] for lab in FakeLab.instances[4:]] != seeds
    cache = object()
    make_vec_env("dmlab:rooms_watermaze", 1, 0, level_cache=cache, process=False)
    assert FakeLab.instances[-1].level_cache is cache
    with pytest.raises(ValueError, match="renderer"):
        make_vec_env("dmlab:rooms_watermaze", 1, 0, renderer="gpu")
    with pytest.raises(ValueError, match="level_cache.*directory"):
        make_vec_env("dmlab:rooms_watermaze", 1, 0, level_cache=cache)
    with pytest.raises(ValueError, match="workers"):
        make_vec_env("dmlab:rooms_watermaze", 2, 0, workers=0)
    with pytest.raises(ValueError, match="unknown DMLab level"):
        make_vec_env("dmlab:rooms_watermaz", 1, 0)


def test_dmlab_missing_module_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)     # makes `import deepmind_lab` fail
    for process in (True, False):
        with pytest.raises(ImportError) as err:
            make_vec_env("dmlab:rooms_select_nonmatching_object", 1, 0, process=process)
        msg = str(err.value)
        assert "make dmlab DMLAB_WHEEL=" in msg and "tools/build_dmlab.sh" in msg
        assert "docker/dmlab.Dockerfile" in msg and "\n" not in msg


def test_dmlab_workers_match_in_process(fake_dmlab, fake_dmlab_workers):
    """Worker processes (split 2 + 1) give the same observations, rewards and dones as in-process envs."""
    def rollout(**kw):
        venv = make_vec_env("dmlab:rooms_watermaze", 3, 5, width=16, height=12, **kw)
        assert len(venv._workers) == min(kw.get("workers", 0), 3)
        out = [venv.reset()]
        rng = np.random.default_rng(0)
        for _ in range(12):
            obs, r, d, info = venv.step(rng.integers(0, 9, 3))
            check_step_types(venv, obs, r, d, info)
            out += [obs, r, d]
        venv.close()
        return out

    local = rollout(process=False)
    for workers in (1, 2, 3, 4):  # 4 > num_envs: 3 workers (a config's workers also serves 1-env venvs)
        for x, y in zip(local, rollout(workers=workers)):
            np.testing.assert_array_equal(x, y)
            assert x.dtype == y.dtype


def test_dmlab_engine_exit_is_one_clear_error(fake_dmlab_workers):
    """A level whose map is missing ends the engine's process; here only a worker dies and the adapter
    raises one line naming the level and the map. This process lives on and can build other envs."""
    venv = make_vec_env("dmlab:natlab_fixed_large_map", 2, 0, workers=2)
    with pytest.raises(DMLabError) as err:
        venv.reset()
    msg = str(err.value)
    assert "'natlab_fixed_large_map'" in msg and "'natlab_fake_map'" in msg and "code 1" in msg
    assert "\n" not in msg
    venv.close()
    venv = make_vec_env("dmlab:rooms_watermaze", 2, 0, width=8, height=6)
    assert venv.reset().shape == (2, 3, 6, 8)
    venv.close()


def test_dmlab_worker_processes_end_on_close(fake_dmlab_workers):
    venv = make_vec_env("dmlab:rooms_watermaze", 4, 0, width=8, height=6, workers=2)
    procs = [w.proc for w in venv._workers]
    assert len({p.pid for p in procs}) == 2 and all(p.poll() is None for p in procs)
    venv.reset()
    venv.close()
    assert all(p.poll() == 0 for p in procs)


def test_bench_envs_and_system_include_dmlab(fake_dmlab_workers, monkeypatch):
    from r2ac.bench.system import CASES
    from r2ac.bench.envs import DEFAULT_ENVS, bench_env

    assert any(env.startswith("dmlab:") for env, _ in DEFAULT_ENVS)
    assert any(env.startswith("dmlab:") for env in CASES)
    row = bench_env("dmlab:rooms_watermaze", {"width": 8, "height": 6, "workers": 2}, num_envs=32, seconds=0.2,
                    repeats=2, warmup_s=0.05)
    assert row["status"] == "ok" and row["num_envs"] == 8          # at most 8 engine instances
    assert row["steps_per_s"] > 0 and abs(row["frames_per_s"] - 4 * row["steps_per_s"]) <= 4
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)
    monkeypatch.delenv("R2AC_DMLAB_MODULE")
    row = bench_env("dmlab:rooms_watermaze", {}, seconds=0.1, repeats=1)
    assert row["status"] == "skipped: deepmind_lab is not installed here"


def test_worker_close_tolerates_a_pipe_that_died_first():
    """A worker process that is dying (not yet reaped, so ``poll()`` is None) may have closed its pipe
    already: closing it must not raise (the race seen once in CI as BrokenPipeError from the test above)."""
    from r2ac.envs.dmlab import _Worker

    class DeadConn:
        closed = False

        def send_bytes(self, _):
            raise BrokenPipeError(32, "Broken pipe")

        def close(self):
            self.closed = True

    class DyingProc:
        waited = False

        def poll(self):
            return None

        def wait(self, timeout=None):
            self.waited = True
            return 1

    w = _Worker.__new__(_Worker)
    w.conn, w.proc, w.level = DeadConn(), DyingProc(), "natlab_fixed_large_map"
    w.close()
    assert w.conn.closed and w.proc.waited
