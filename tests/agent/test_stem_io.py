"""Pretrained stem files: export, load, and clear errors for files that do not fit."""

import pytest
import torch
from safetensors.torch import save_file

from r2ac.agent.stem_io import StemFileError, export_stem, load_pretrained_stem, read_stem_file
from r2ac.agent.stems import make_stem


def test_round_trip_with_metadata(tmp_path):
    a = make_stem("impala", (3, 64, 64))
    path = export_stem(a, str(tmp_path / "stem.safetensors"), env_id="procgen:chaser", steps=1234, score=5.5,
                       config_hash="abc")
    b = make_stem("impala", (3, 64, 64))
    meta = load_pretrained_stem(b, path)
    assert meta["steps"] == 1234 and meta["env_id"] == "procgen:chaser" and meta["kind"] == "impala"
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k])
    _, meta2 = read_stem_file(path)
    assert meta2 == meta


@pytest.mark.parametrize("other, match", [
    (lambda: make_stem("impala", (3, 72, 96)), "observation_shape"),
    (lambda: make_stem("shallow", (3, 64, 64), channels=[16, 32]), "kind"),
    (lambda: make_stem("impala", (3, 64, 64), channels=[16, 32, 64]), "channels"),
    (lambda: make_stem("impala", (3, 64, 64), fc=128), "fc"),
])
def test_mismatch_is_a_clear_error(tmp_path, other, match):
    path = export_stem(make_stem("impala", (3, 64, 64)), str(tmp_path / "s.safetensors"), env_id="procgen:chaser")
    with pytest.raises(StemFileError, match=match):
        load_pretrained_stem(other(), path)


def test_missing_and_foreign_files(tmp_path):
    stem = make_stem("mlp", (8,), fc=4)
    with pytest.raises(StemFileError, match="r2ac pretrain"):
        load_pretrained_stem(stem, str(tmp_path / "nope.safetensors"))
    save_file({"x": torch.zeros(2)}, str(tmp_path / "foreign.safetensors"))
    with pytest.raises(StemFileError, match="no r2ac stem metadata"):
        load_pretrained_stem(stem, str(tmp_path / "foreign.safetensors"))
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(StemFileError, match="not a readable"):
        load_pretrained_stem(stem, str(tmp_path / "junk.safetensors"))
