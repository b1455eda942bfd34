"""The DeepMind Lab adapter against the real engine (``make dmlab``; CI installs the wheel from
../shared/wheels when it exists). Without the ``deepmind_lab`` module every test here skips and says how
to install it. The fake-module tests (always run): tests/envs/test_dmlab_fake.py."""

import importlib.util
import os
import time

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.dmlab import DMLabError

from test_envs import check_step_types

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deepmind_lab") is None,
    reason="DeepMind Lab is not installed: `make dmlab DMLAB_WHEEL=path/to/deepmind_lab-1.0-py3-none-any.whl` "
           "(or `make dmlab` to build it from source) runs these tests against the real engine")

LEVEL = "dmlab:rooms_watermaze"


def test_real_observations_actions_and_repeat():
    """96x72 RGB as (3, 72, 96) uint8 frames; 9 actions; each agent step is 4 engine frames; looking left
    and right from the same start give different views."""
    venv = make_vec_env(LEVEL, 2, 3, process=False)
    assert venv.observation_shape == (3, 72, 96) and venv.num_actions == 9
    obs = venv.reset()
    assert obs.shape == (2, 3, 72, 96) and obs.dtype == np.uint8
    assert obs.std() > 5 and len(np.unique(obs)) > 20        # a rendered scene, not a blank frame
    labs = venv._group.labs
    assert [lab.num_steps() for lab in labs] == [0, 0]
    for t in range(1, 4):
        obs2, r, d, info = venv.step(np.array([4, 5]))        # look left, look right
        check_step_types(venv, obs2, r, d, info)
        assert [lab.num_steps() for lab in labs] == [4 * t, 4 * t]
    assert not np.array_equal(obs2[0], obs[0]) and not np.array_equal(obs2[1], obs[1])
    venv.close()


def test_real_episode_end_and_autoreset():
    """With episodeLengthSeconds=2 (120 frames at 60 fps) an episode is 30 agent steps; the env resets at
    once and its next observation is the new episode's first frame."""
    venv = make_vec_env(LEVEL, 2, 0, config={"episodeLengthSeconds": 2}, workers=2)
    venv.reset()
    for t in range(1, 31):
        obs, r, d, info = venv.step(np.array([0, 6]))
        check_step_types(venv, obs, r, d, info)
        assert d.all() == (t == 30) and not (d.any() and t < 30)
    np.testing.assert_array_equal(info["episode_length"], [30, 30])
    assert obs.std() > 5
    obs, r, d, info = venv.step(np.array([0, 6]))
    assert not d.any()
    venv.close()


def test_real_seeding_and_several_envs_per_process():
    """The same seed gives the same frames whatever the split of envs across worker processes (4 envs in
    1 or 2 processes); another seed gives other episodes; different envs of one process differ."""
    def rollout(seed, workers):
        venv = make_vec_env(LEVEL, 4, seed, workers=workers)
        assert len({w.proc.pid for w in venv._workers}) == workers
        frames = [venv.reset()]
        rng = np.random.default_rng(1)
        for _ in range(8):
            frames.append(venv.step(rng.integers(0, 9, 4))[0])
        venv.close()
        return np.stack(frames)

    a, b, c = rollout(7, 1), rollout(7, 2), rollout(8, 2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert all(not np.array_equal(a[:, i], a[:, j]) for i in range(4) for j in range(i + 1, 4))


def test_real_level_cache_directory(tmp_path):
    """A level that compiles its map at reset writes the .pk3 to the cache directory; a second env with the
    same seed fetches it (same first frame, much faster)."""
    level = "dmlab:rooms_keys_doors_puzzle"
    t0 = time.perf_counter()
    venv = make_vec_env(level, 1, 11, level_cache=str(tmp_path))
    first = venv.reset()
    cold = time.perf_counter() - t0
    venv.close()
    cached = sorted(os.listdir(tmp_path))
    assert cached and not any(name.startswith(".tmp-") for name in cached)
    t0 = time.perf_counter()
    venv = make_vec_env(level, 1, 11, level_cache=tmp_path)
    again = venv.reset()
    warm = time.perf_counter() - t0
    venv.close()
    np.testing.assert_array_equal(first, again)
    assert sorted(os.listdir(tmp_path)) == cached
    assert warm < cold, (warm, cold)


def test_real_missing_map_is_one_clear_error():
    """natlab levels need maps absent from the public sources: the engine exits its process; the adapter
    raises one line naming the level and the map, and this process goes on."""
    venv = make_vec_env("dmlab:natlab_fixed_large_map", 1, 0)
    with pytest.raises(DMLabError) as err:
        venv.reset()
    msg = str(err.value)
    assert "'natlab_fixed_large_map'" in msg and "natlab_forage" in msg and "\n" not in msg
    venv.close()


def test_real_training_starts_and_logs_like_other_suites(tmp_path, monkeypatch, wandb_env):
    """The CPU config of docs/results-dmlab.md trains a few updates on the real engine and logs metrics.csv,
    TensorBoard events and an offline W&B run (group/tags from the config), as the other suites do."""
    import glob

    from r2ac.config import load_config
    from r2ac.logger import read_metrics
    from r2ac.runtime.local import train

    from test_logger import wandb_history

    run = tmp_path / "run"
    cfg = load_config("configs/dmlab/select_nonmatching_quick_rtrl.yaml",
                      [f"run_dir={run}", "env.num_envs=2", "env.options={workers: 1}", "learner.batch_size=2",
                       "total_steps=200", "logger.log_interval_s=0.5", "logger.progress_bar=false", "eval.sets=0",
                       "logger.wandb=true", "logger.tensorboard=true"])
    assert cfg.logger.wandb_group == "dmlab"
    train(cfg)
    _, rows = read_metrics(str(run / "metrics.csv"))
    assert rows and float(rows[-1]["step"]) >= 200 and int(float(rows[-1]["updates"])) >= 5
    assert glob.glob(str(run / "tensorboard" / "events.out.tfevents.*"))
    run_id = (run / "wandb_run_id").read_text().strip()
    files = glob.glob(str(run / "wandb" / f"offline-run-*-{run_id}" / f"run-{run_id}.wandb"))
    assert files and any("learner/total_loss" in row for row in wandb_history(files[0]))  # W&B: namespaced


@pytest.mark.parametrize("path", ["configs/dmlab/watermaze_rtrl_m100.yaml",
                                  "configs/dmlab/select_nonmatching_tbptt_m10.yaml",
                                  "configs/dmlab/keys_doors_feedforward.yaml"])
def test_real_paper_configs_start(path, tmp_path):
    """The paper-scale configs a GPU-cluster user runs (IMPALA deep stem, eLSTM 512, their M) start on the real
    engine: shrunk to 2 envs, batch 2 and 2 updates in one process, everything else as shipped."""
    from r2ac.config import load_config
    from r2ac.logger import read_metrics
    from r2ac.runtime.local import train

    shipped = load_config(path)
    assert shipped.runtime.kind == "ray" and shipped.runtime.num_actors == 48 and shipped.total_steps >= 30_000_000
    m = shipped.learner.unroll_length
    cfg = load_config(path, [f"run_dir={tmp_path}", "runtime.kind=local", "runtime.num_actors=1", "env.num_envs=2",
                             "learner.batch_size=2", f"total_steps={4 * m}", "eval.sets=0", "logger.tensorboard=false",
                             "logger.progress_bar=false", "logger.log_interval_s=0.5"])
    assert cfg.model.stem == "impala" and cfg.model.hidden_size == 512
    summary = train(cfg)
    _, rows = read_metrics(str(tmp_path / "metrics.csv"))
    assert int(float(rows[-1]["updates"])) >= 2, summary
