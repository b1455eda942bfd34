"""``model.frame_extremes``: each channel's largest and smallest value of the centred frame as 2C more core
inputs, the same wherever in the frame an object lies (docs/results.md, "A small square on a large frame")."""

import pytest
import torch

from r2ac.agent.inputs import centre_frame, channel_extremes, channel_spread, helmert_basis
from r2ac.agent.nets import AgentNet
from r2ac.config import load_config

from test_agent import check_centred_frame_flag, check_statistics_after_the_centres


def _frame(y: int, x: int, size: int = 16, colour=(220, 40, 40), patch: int = 3) -> torch.Tensor:
    """A grey uint8 frame [3, size, size] with one square of ``colour`` at (y, x)."""
    frame = torch.full((3, size, size), 128, dtype=torch.uint8)
    frame[:, y:y + patch, x:x + patch] = torch.tensor(colour, dtype=torch.uint8)[:, None, None]
    return frame


def test_channel_extremes_are_each_channels_max_then_min():
    frame = torch.tensor([[0.0, -1.0, 2.0, 5.0, 4.0, 4.5]])  # 2 channels of 3 pixels each
    assert torch.equal(channel_extremes(frame, 2), torch.tensor([[2.0, 5.0, -1.0, 4.0]]))
    batch = torch.randn(4, 5, 3 * 7, dtype=torch.float64)
    per_channel = batch.unflatten(-1, (3, 7))
    assert torch.equal(channel_extremes(batch, 3), torch.cat([per_channel.amax(-1), per_channel.amin(-1)], -1))
    with pytest.raises(ValueError, match="channel_extremes: 7 pixel features do not split into 3 channels"):
        channel_extremes(torch.zeros(7), 3)


def test_a_square_gives_the_same_extremes_wherever_it_lies_and_the_mean_gives_its_share():
    """On a flat grey frame the extremes of a 3 x 3 red square are its colour minus grey, at any place and for
    any frame size, where the channel mean falls with the square's share of the frame."""
    for size in (16, 64):
        stats = []
        for y, x in ((0, 0), (5, 9), (size - 3, size - 3)):
            feats = _frame(y, x, size).flatten().to(torch.float64) / 255
            centred, means = centre_frame(feats, 3, "median_feed_mean")
            stats.append(channel_extremes(centred, 3))
        for s in stats[1:]:
            assert torch.equal(s, stats[0])
        want = torch.tensor([220 - 128, 0, 0, 0, 40 - 128, 40 - 128], dtype=torch.float64) / 255
        assert torch.allclose(stats[0], want)
        assert torch.allclose(means[0] - 128 / 255, torch.tensor(92 / 255 * 9 / size ** 2, dtype=torch.float64))


def test_the_network_feeds_the_extremes_after_the_centres_and_spreads():
    check_statistics_after_the_centres("frame_extremes", lambda c: [channel_spread(c, 3), channel_extremes(c, 3)],
                                       {"frame_spread": True}, (3, 6))


def test_with_running_centres_and_contrasts_the_extremes_are_centred_and_rotated_like_the_centres():
    net = AgentNet((3, 8, 8), 3, stem="none", hidden_size=4, frame_extremes=True, running_centres=True,
                   centre_basis="contrasts", frame_pool=2)
    assert net.centre_mean.shape == (3 * 3,)
    obs = torch.randint(0, 256, (5, 2, 3, 8, 8), dtype=torch.uint8)
    net.observe_frames(obs)
    assert net.centre_mean.abs().min() > 0
    feats = net.features(obs)
    centred, raw = net.frame_stats(feats, obs)
    assert raw.shape[-1] == 9 and torch.allclose(raw[..., 3:], channel_extremes(centred, 3))
    rot = helmert_basis(3).to(raw.dtype)
    shifted = (raw - net.centre_mean).unflatten(-1, (3, 3))
    assert torch.allclose(net.scaled_features(feats)[..., -9:], (shifted @ rot.T).flatten(-2), atol=1e-6)


def test_frame_extremes_need_centred_frames_and_load_from_configs():
    assert load_config("configs/quickstart.yaml").model.frame_extremes == "auto"
    check_centred_frame_flag("frame_extremes", "true, false or 'auto'")


def test_auto_feeds_the_extremes_where_frames_are_centred_and_nowhere_else():
    assert AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, frame_extremes="auto").frame_extremes
    assert not AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, centre_frames=False,
                        frame_extremes="auto").frame_extremes
    assert not AgentNet((5,), 3, stem="none", hidden_size=4, frame_extremes="auto").frame_extremes
    assert not AgentNet((3, 16, 16), 3, stem="impala", stem_channels=[4], stem_fc=8, hidden_size=4,
                        frame_extremes="auto").frame_extremes
    assert AgentNet.from_config(load_config("configs/quickstart.yaml").model, (3, 4, 4), 3).frame_extremes
    assert not AgentNet.from_config(load_config("configs/quickstart.yaml").model, (5,), 3).frame_extremes


def test_ppo_refuses_frame_extremes():
    from r2ac.envs import make_vec_env
    from r2ac.runtime.ppo import build_ppo_net

    venv = make_vec_env("tmaze", 2, 0)
    with pytest.raises(ValueError, match="model.frame_extremes and model.frame_centroids to auto or false"):
        build_ppo_net(load_config("ppo/base.yaml", ["env.id=tmaze", "model.frame_extremes=true"]), venv)
    assert build_ppo_net(load_config("ppo/base.yaml", ["env.id=tmaze", "model.frame_extremes=auto"]), venv) is not None
