"""``model.frame_centroids``: each channel's centroid of what lies above its centre in the centred frame, as 2C
more core inputs: a small object's place as two numbers wherever it is (docs/results.md, "Where an object is,
as two numbers")."""

import pytest
import torch

from r2ac.agent.inputs import centre_frame, channel_centroids, channel_extremes, helmert_basis
from r2ac.agent.nets import AgentNet
from r2ac.config import load_config

from test_agent import check_centred_frame_flag, check_statistics_after_the_centres


def _frame(y: int, x: int, size: int = 16, colour=(220, 40, 40), patch: int = 3, floor: int = 0) -> torch.Tensor:
    """A uint8 frame [3, size, size] of ``floor`` with one square of ``colour`` at (y, x)."""
    frame = torch.full((3, size, size), floor, dtype=torch.uint8)
    frame[:, y:y + patch, x:x + patch] = torch.tensor(colour, dtype=torch.uint8)[:, None, None]
    return frame


def _centroids(frame: torch.Tensor) -> torch.Tensor:
    C, H, W = frame.shape
    centred, _ = centre_frame(frame.flatten().to(torch.float64) / 255, C, "median_feed_mean")
    return channel_centroids(centred, C, H, W)


def test_a_squares_centroid_is_its_centre_on_a_grid_from_minus_one_to_one():
    """On a black 16 x 16 frame a 3 x 3 square at (y, x) has its centre at (y + 1, x + 1), which on the grid
    of 16 places from -1 to 1 is (2 (x + 1) / 15 - 1, ...), in every channel that is above the floor; the x
    coordinates of the 3 channels come first, then the y coordinates."""
    for y, x in ((0, 0), (5, 9), (13, 13), (0, 13)):
        got = _centroids(_frame(y, x))
        cx, cy = 2 * (x + 1) / 15 - 1, 2 * (y + 1) / 15 - 1
        assert torch.allclose(got, torch.tensor([cx] * 3 + [cy] * 3, dtype=torch.float64)), (y, x, got)


def test_channels_with_nothing_above_their_centre_give_zero():
    """A black frame, a grey one, and a square whose colour lies in one channel only (the others at the floor)."""
    for frame in (torch.zeros(3, 8, 8, dtype=torch.uint8), torch.full((3, 8, 8), 100, dtype=torch.uint8)):
        assert torch.equal(_centroids(frame), torch.zeros(6, dtype=torch.float64))
    got = _centroids(_frame(0, 5, size=8, colour=(0, 0, 200)))
    assert got[[0, 1, 3, 4]].abs().max() == 0
    assert torch.allclose(got[[2, 5]], torch.tensor([2 * 6 / 7 - 1, 2 * 1 / 7 - 1], dtype=torch.float64))


def test_below_the_centre_does_not_count_and_brighter_weighs_more():
    """On a grey floor a dark square moves nothing; of two bright pixels the centroid lies nearer the brighter."""
    assert torch.equal(_centroids(_frame(2, 2, size=8, colour=(10, 10, 10), floor=128)), torch.zeros(6).double())
    frame = torch.zeros(1, 1, 5, dtype=torch.uint8)
    frame[0, 0, 0], frame[0, 0, 4] = 255, 85  # x = -1 and 1, weights 3:1
    assert torch.allclose(_centroids(frame), torch.tensor([-0.5, 0.0], dtype=torch.float64))


def test_channel_centroids_check_the_frame_size():
    with pytest.raises(ValueError, match="channel_centroids: 48 pixel features are not 3 channels of 4 x 5"):
        channel_centroids(torch.zeros(48), 3, 4, 5)


def test_the_network_feeds_the_centroids_after_the_extremes():
    check_statistics_after_the_centres("frame_centroids",
                                       lambda c: [channel_extremes(c, 3), channel_centroids(c, 3, 4, 4)],
                                       {"frame_extremes": True}, (6, 6))


def test_pooled_frames_give_centroids_on_the_pooled_grid_with_running_centres_and_contrasts():
    """With frame_pool the centroids are taken on the pooled frame; with running centres and the contrasts
    basis they are centred and rotated like the other statistics (each group of C)."""
    net = AgentNet((3, 16, 16), 3, stem="none", hidden_size=4, frame_extremes=True, frame_centroids=True,
                   running_centres=True, centre_basis="contrasts", frame_pool=2)
    assert net.centre_mean.shape == (3 * 5,)  # means, maxima, minima, x and y centroids
    obs = torch.stack([_frame(2 * i, 2 * i, patch=4) for i in range(6)]).view(3, 2, 3, 16, 16)
    net.observe_frames(obs)
    feats = net.features(obs)
    centred, raw = net.frame_stats(feats, obs)
    assert torch.allclose(raw[..., 9:], channel_centroids(centred, 3, 8, 8))
    # the 4 x 4 square at (2i, 2i) is the pooled 2 x 2 square at (i, i): its centre i + 0.5 of 0 .. 7
    want_x = torch.tensor([2 * (i + 0.5) / 7 - 1 for i in range(6)]).view(3, 2)
    assert torch.allclose(raw[..., 9], want_x) and torch.allclose(raw[..., 14], want_x)
    rot = helmert_basis(3).to(raw.dtype)
    shifted = (raw - net.centre_mean).unflatten(-1, (5, 3))
    assert torch.allclose(net.scaled_features(feats)[..., -15:], (shifted @ rot.T).flatten(-2), atol=1e-6)


def test_frame_centroids_need_centred_frames_and_load_from_configs():
    assert load_config("configs/quickstart.yaml").model.frame_centroids == "auto"
    assert AgentNet.from_config(load_config("configs/quickstart.yaml").model, (3, 4, 4), 3).frame_centroids
    assert not AgentNet.from_config(load_config("configs/quickstart.yaml").model, (5,), 3).frame_centroids
    check_centred_frame_flag("frame_centroids", "true, false or 'auto'")
    assert AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, frame_centroids="auto").frame_centroids
    assert not AgentNet((5,), 3, stem="none", hidden_size=4, frame_centroids="auto").frame_centroids


def test_ppo_refuses_frame_centroids():
    from r2ac.envs import make_vec_env
    from r2ac.runtime.ppo import build_ppo_net

    venv = make_vec_env("tmaze", 2, 0)
    with pytest.raises(ValueError, match="model.frame_extremes and model.frame_centroids to auto or false"):
        build_ppo_net(load_config("ppo/base.yaml", ["env.id=tmaze", "model.frame_centroids=true"]), venv)
