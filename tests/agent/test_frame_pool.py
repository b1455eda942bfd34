"""``model.frame_pool``: raw image frames (stem 'none') averaged over blocks of pixels before the core, so frames
larger than the suite's 24 x 24 cost about what 24 x 24 ones do (docs/results.md, "Frames larger than the
suite's")."""

import numpy as np
import pytest
import torch

from r2ac.agent.nets import AgentNet, resolve_frame_pool
from r2ac.agent.stems import make_stem
from r2ac.config import load_config
from r2ac.config.loading import upgrade_resolved


@pytest.mark.parametrize("shape, pool", [((3, 16, 16), 1), ((3, 24, 24), 1), ((3, 25, 25), 2), ((3, 48, 48), 2),
                                         ((3, 64, 64), 3), ((3, 84, 84), 4), ((4, 84, 84), 4), ((1, 96, 24), 2),
                                         ((3, 200, 8), 2)])
def test_auto_pools_raw_frames_to_at_most_24_by_24_pixels_and_no_further(shape, pool):
    assert resolve_frame_pool("auto", "none", shape) == pool
    _, h, w = shape
    assert -(-h // pool) * -(-w // pool) <= 576
    assert pool == 1 or -(-h // (pool - 1)) * -(-w // (pool - 1)) > 576


def test_auto_leaves_vectors_and_conv_stems_alone_and_a_block_they_cannot_take_is_refused():
    assert resolve_frame_pool("auto", "none", (984,)) == 1
    assert resolve_frame_pool("auto", "impala", (3, 64, 64)) == 1
    assert resolve_frame_pool(1, "impala", (3, 64, 64)) == 1
    with pytest.raises(ValueError, match=r"model.frame_pool=2 .*stem 'impala'.*model.frame_pool=1"):
        resolve_frame_pool(2, "impala", (3, 64, 64))
    with pytest.raises(ValueError, match=r"model.frame_pool=2 .*\(12,\).*model.frame_pool=1"):
        resolve_frame_pool(2, "none", (12,))
    for bad in (0, -1, 1.5, True, "big"):
        with pytest.raises(ValueError, match="whole number >= 1 or 'auto'"):
            resolve_frame_pool(bad, "none", (3, 64, 64))


def test_pooled_uint8_frames_are_each_blocks_mean_rounded_and_edge_blocks_average_their_part_inside():
    stem = make_stem("none", (3, 7, 5), pool=3)
    assert stem.frame_shape == (3, 3, 2) and stem.output_size == 18
    x = torch.randint(0, 256, (2, 4, 3, 7, 5), dtype=torch.uint8)
    got = stem.frames(x)
    assert got.dtype == torch.uint8 and got.shape == (2, 4, 3, 3, 2)
    xs = x.numpy().astype(np.float64)
    for i, (a, b) in enumerate(((0, 3), (3, 6), (6, 7))):
        for j, (c, d) in enumerate(((0, 3), (3, 5))):
            want = np.round(xs[..., a:b, c:d].mean(axis=(-1, -2)))
            assert np.array_equal(got[..., i, j].numpy(), want)
    # what enters the core: the pooled levels / 255, flattened channel-major, as unpooled frames do
    assert torch.equal(stem(x), got.reshape(2, 4, 18).to(torch.float32) / 255)
    f = torch.rand(5, 3, 7, 5, dtype=torch.float64)  # floating frames: the plain mean, their dtype kept
    assert torch.allclose(stem(f)[:, 0], f[:, 0, :3, :3].mean((-1, -2)), rtol=0, atol=1e-15)
    assert stem(f).dtype == torch.float64


def test_pool_one_is_the_frame_as_it_is():
    x = torch.randint(0, 256, (6, 3, 24, 24), dtype=torch.uint8)
    plain, one = make_stem("none", (3, 24, 24)), make_stem("none", (3, 24, 24), pool=1)
    assert one.frame_shape == (3, 24, 24) and torch.equal(one(x), plain(x)) and torch.equal(one.frames(x), x)
    with pytest.raises(ValueError, match="needs image observations"):
        make_stem("none", (12,), pool=2)


def _net(shape, **kw):
    cfg = load_config("configs/quickstart.yaml", ["model.hidden_size=8"])
    return AgentNet.from_config(cfg.model, shape, 4) if not kw else AgentNet(shape, 4, stem="none", hidden_size=8,
                                                                            centre_frames=True, **kw)


def test_a_pooled_network_centres_the_pooled_frames_and_its_fast_median_is_torchs():
    net = _net((3, 64, 64))
    assert net.frame_pool == 3 and net.stem.frame_shape == (3, 22, 22) and net.centre_frames
    # pixels, channel means, channel extremes (model.frame_extremes auto), centroids on the pooled grid
    # (model.frame_centroids auto), reward, episode-start flag
    assert net.core_input_size == 3 * 22 * 22 + 3 + 6 + 6 + 1 + 1
    obs = torch.randint(0, 256, (3, 2, 3, 64, 64), dtype=torch.uint8)
    feats = net.features(obs)
    assert feats.shape == (3, 2, 3 * 22 * 22)
    # the levels read back from the features (no second pooling) are the pooled frames' own
    assert torch.equal(feats.mul(255).round().to(torch.uint8), net.stem.frames(obs).reshape(feats.shape))
    fast, slow = net.frame_stats(feats, obs), net.frame_stats(feats)  # the uint8 levels' median, torch.median
    assert torch.equal(fast[0], slow[0]) and torch.equal(fast[1], slow[1])
    out, state = net({"obs": obs, "reward": torch.zeros(3, 2), "action": torch.zeros(3, 2, dtype=torch.long),
                      "done": torch.zeros(3, 2, dtype=torch.bool)}, net.initial_state(2))
    assert out["policy_logits"].shape == (3, 2, 4) and state["dc_dF"].shape == (2, 8, net.core_input_size)


def test_an_explicit_block_and_old_runs_configs():
    assert _net((3, 64, 64), frame_pool=4).stem.frame_shape == (3, 16, 16)
    assert _net((3, 64, 64), frame_pool=1).stem.frame_shape == (3, 64, 64)
    assert AgentNet((3, 64, 64), 4, stem="none", hidden_size=8).frame_pool == 1  # the constructor's default
    # a run saved before model.frame_pool existed fed its frames whole: it reads back as frame_pool 1
    assert upgrade_resolved({"model": {"stem": "none"}})["model"]["frame_pool"] == 1
    assert load_config("configs/quickstart.yaml").model.frame_pool == "auto"


def test_a_run_on_larger_frames_trains_on_pooled_frames_and_its_policy_acts_on_the_envs_own(tmp_path):
    """A short run of the user-style colour task on 48 x 48 frames: the saved network takes its frames
    pooled by 2, and ``r2ac.load`` serves it on the env's 48 x 48 frames."""
    import r2ac
    from r2ac.envs import make_vec_env
    from r2ac.runtime.local import train

    options = "env.options={span: 4, size: 48, patch: 12}"
    cfg = load_config("configs/quickstart.yaml", [
        f"run_dir={tmp_path}", "total_steps=600", "env.num_envs=4", "learner.batch_size=4", "model.hidden_size=8",
        "env.id=gym:examples.colour_patch:ColourPatch", options, "logger.log_interval_s=0.01",
        "logger.tensorboard=false", "logger.progress_bar=false"])
    assert train(cfg)["status"] == "finished"
    policy = r2ac.load(str(tmp_path))
    assert policy.net.frame_pool == 2 and policy.net.stem.frame_shape == (3, 24, 24)
    venv = make_vec_env(cfg.env.id, 2, 0, **cfg.env.options)
    obs = venv.reset()
    assert obs.shape == (2, 3, 48, 48)
    action, _ = policy.act(obs, policy.initial_state(2))
    assert action.shape == (2,)


def test_ppo_refuses_a_block_and_takes_auto():
    from r2ac.envs import make_vec_env
    from r2ac.runtime.ppo import build_ppo_net

    venv = make_vec_env("tmaze", 2, 0)
    assert build_ppo_net(load_config("ppo/base.yaml", ["env.id=tmaze"]), venv) is not None
    with pytest.raises(ValueError, match="model.frame_pool=auto or 1 with algo=ppo"):
        build_ppo_net(load_config("ppo/base.yaml", ["env.id=tmaze", "model.frame_pool=2"]), venv)
