"""Stems: IMPALA flatten sizes for DMLab / Atari / ProcGen, input scaling, factory and metadata."""

import json

import pytest
import torch

from r2ac.agent.stems import (
    IdentityStem,
    ImpalaResNetStem,
    MLPStem,
    ShallowAtariStem,
    make_stem,
    stem_metadata,
)


@pytest.mark.parametrize(
    "observation_shape, feature_map",
    [
        ((3, 72, 96), (32, 9, 12)),  # DMLab RGB 96 wide x 72 high
        ((4, 84, 84), (32, 11, 11)),  # Atari, 4 stacked grey frames
        ((3, 64, 64), (32, 8, 8)),  # ProcGen
    ],
)
def test_impala_stem_flatten_sizes(observation_shape, feature_map):
    stem = make_stem("impala", observation_shape, fc=256)
    assert isinstance(stem, ImpalaResNetStem)
    assert stem.feature_map_shape == feature_map
    assert stem.flatten_size == feature_map[0] * feature_map[1] * feature_map[2]
    assert stem.linear.in_features == stem.flatten_size
    # The computed size matches what the convolutions actually produce.
    x = torch.randint(0, 256, (2, *observation_shape), dtype=torch.uint8)
    with torch.no_grad():
        fmap = stem.stages(x.float() / 255)
        out = stem(x)
    assert tuple(fmap.shape[1:]) == feature_map
    assert out.shape == (2, 256) and stem.output_size == 256
    assert (out >= 0).all()  # final relu


def test_impala_stem_structure():
    stem = ImpalaResNetStem(3, 64, 64)
    assert [s.conv.out_channels for s in stem.stages] == [16, 32, 32]
    stage = stem.stages[0]
    assert stage.conv.kernel_size == (3, 3) and stage.conv.stride == (1, 1) and stage.conv.padding == (1, 1)
    assert stage.pool.kernel_size == 3 and stage.pool.stride == 2 and stage.pool.padding == 1
    # A residual block with zeroed convolutions is the identity (skip connection).
    block = stage.res0
    for conv in (block.conv0, block.conv1):
        torch.nn.init.zeros_(conv.weight)
        torch.nn.init.zeros_(conv.bias)
    x = torch.randn(1, 16, 8, 8)
    torch.testing.assert_close(block(x), x)


def test_uint8_scaled_and_float_used_as_given():
    stem = make_stem("impala", (3, 64, 64), fc=32)
    frames = torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(stem(frames), stem(frames.float() / 255.0))
    with pytest.raises(TypeError, match="uint8 or floating"):
        stem(frames.long())


def test_leading_dims_are_kept():
    stem = make_stem("shallow", (4, 84, 84), fc=64)
    x = torch.randint(0, 256, (3, 2, 4, 84, 84), dtype=torch.uint8)  # time-major [T, B, C, H, W]
    with torch.no_grad():
        y = stem(x)
        y_flat = stem(x.reshape(6, 4, 84, 84))
    assert y.shape == (3, 2, 64)
    torch.testing.assert_close(y.reshape(6, 64), y_flat)
    with pytest.raises(ValueError, match="expects input"):
        stem(torch.zeros(2, 3, 84, 84))


def test_shallow_stem():
    stem = make_stem("shallow", (4, 84, 84))
    assert isinstance(stem, ShallowAtariStem)
    assert stem.conv0.kernel_size == (8, 8) and stem.conv0.stride == (4, 4) and stem.conv0.out_channels == 16
    assert stem.conv1.kernel_size == (4, 4) and stem.conv1.stride == (2, 2) and stem.conv1.out_channels == 32
    assert stem.feature_map_shape == (32, 9, 9) and stem.output_size == 256
    with pytest.raises(ValueError, match="too small"):
        make_stem("shallow", (1, 16, 16))
    # orthogonal init, gain sqrt(2): W W^T = 2 I over the (fewer) output rows; zero biases
    w = stem.linear.weight.detach().double()
    torch.testing.assert_close(w @ w.t(), 2 * torch.eye(256, dtype=torch.float64), atol=1e-5, rtol=0)
    w0 = stem.conv0.weight.detach().double().flatten(1)
    torch.testing.assert_close(w0 @ w0.t(), 2 * torch.eye(16, dtype=torch.float64), atol=1e-5, rtol=0)
    assert all(float(m.bias.abs().max()) == 0.0 for m in (stem.conv0, stem.conv1, stem.linear))


def test_vector_stems():
    mlp = make_stem("mlp", (10,), fc=64)
    assert isinstance(mlp, MLPStem) and mlp.output_size == 64
    assert mlp(torch.randn(5, 10)).shape == (5, 64)
    deep = make_stem("mlp", (10,), channels=(32,), fc=16)
    assert [m.out_features for m in deep.net if isinstance(m, torch.nn.Linear)] == [32, 16]
    ident = make_stem("none", (7,))
    assert isinstance(ident, IdentityStem) and ident.output_size == 7
    x = torch.randn(3, 4, 7, dtype=torch.float64)
    assert ident(x).dtype == torch.float64  # float input keeps its dtype
    torch.testing.assert_close(ident(x), x)
    # Vector observations are numbers, not pixels: integer input is cast without /255.
    counts = torch.tensor([[0, 3, 255, 1, 0, 0, 2]], dtype=torch.uint8)
    torch.testing.assert_close(ident(counts), counts.float())
    counts10 = torch.randint(0, 256, (2, 10), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(mlp(counts10), mlp(counts10.float()))


@pytest.mark.parametrize("kind", ["impala", "shallow"])
def test_image_stem_rejects_vector_shape(kind):
    with pytest.raises(ValueError) as info:
        make_stem(kind, (8,))
    msg = str(info.value)
    assert "(8,)" in msg and "'mlp'" in msg and "'none'" in msg


@pytest.mark.parametrize("kind, shape", [("none", (3, 64)), ("mlp", (3, 64)), ("mlp", (1, 3, 64, 64))])
def test_vector_stem_rejects_image_shape(kind, shape):
    with pytest.raises(ValueError) as info:
        make_stem(kind, shape)
    msg = str(info.value)
    assert str(shape) in msg and "'impala'" in msg and "'shallow'" in msg


def test_none_stem_flattens_images():
    stem = make_stem("none", (3, 4, 4))
    frames = torch.randint(0, 256, (2, 3, 3, 4, 4), dtype=torch.uint8)
    assert torch.allclose(stem(frames), frames.reshape(2, 3, 48).float() / 255)


def test_mlp_stem_flattens_small_images():
    stem = make_stem("mlp", (3, 8, 8), channels=[], fc=32)
    frames = torch.randint(0, 256, (5, 2, 3, 8, 8), dtype=torch.uint8)
    y = stem(frames)
    assert y.shape == (5, 2, 32)
    lin = stem.net[0]
    expect = torch.relu(frames.reshape(10, -1).float() / 255 @ lin.weight.T + lin.bias).reshape(5, 2, 32)
    assert torch.allclose(y, expect, atol=1e-6)


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown stem kind 'resnet'.*impala"):
        make_stem("resnet", (3, 64, 64))


@pytest.mark.parametrize(
    "kind, shape, channels, fc",
    [
        ("impala", (3, 72, 96), (16, 32, 32), 256),
        ("impala", (3, 64, 64), (8, 16), 128),
        ("shallow", (4, 84, 84), (16, 32), 256),
        ("mlp", (10,), (32,), 64),
        ("none", (7,), None, None),
    ],
)
def test_metadata_round_trip(kind, shape, channels, fc):
    stem = make_stem(kind, shape, channels=channels, fc=fc)
    meta = json.loads(json.dumps(stem_metadata(stem)))  # JSON-friendly
    assert meta["kind"] == kind and tuple(meta["observation_shape"]) == shape
    rebuilt = make_stem(**meta)
    rebuilt.load_state_dict(stem.state_dict())  # same architecture
    assert rebuilt.output_size == stem.output_size
    x = torch.rand(2, *shape)
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(x), stem(x))
