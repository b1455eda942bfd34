"""The frozen-stem pipeline: TBPTT pretraining, stem export, frozen stem, actors that ship features."""

import csv
import json

import torch

from r2ac.agent.stem_io import read_stem_file
from r2ac.checkpoint import load_latest_checkpoint
from r2ac.cli import main
from r2ac.config import load_config
from r2ac.runtime.pipeline import pipeline

SMALL = ["total_steps=2400", "pipeline.pretrain_steps=2400", "pipeline.pretrain_unroll_length=20", "env.num_envs=8",
         "learner.batch_size=8", "model.hidden_size=16", "model.stem_fc=16", "logger.tensorboard=false",
         "logger.progress_bar=false", "logger.log_interval_s=0.01", "env.options={size: 5, episode_length: 30}"]


def test_pipeline_freezes_the_pretrained_stem(tmp_path):
    cfg = load_config("configs/memory/watermaze_pipeline.yaml", SMALL + [f"run_dir={tmp_path}"])
    out = pipeline(cfg)
    stem_file = tmp_path / "pretrain" / "stem.safetensors"
    tensors, meta = read_stem_file(str(stem_file))
    assert meta["learning"] == "tbptt" and meta["unroll_length"] == 20 and meta["env_id"] == "watermaze"
    assert meta["steps"] >= 2400 and meta["observation_shape"] == [3, 7, 7]
    # stage 1 trained the stem: it differs from a fresh initialisation's... and stage 2 kept it bit-identical
    main_ck = load_latest_checkpoint(str(tmp_path / "main"))
    assert main_ck["extra"]["learner"]["updates"] > 0
    for k, v in tensors.items():
        assert torch.equal(main_ck["model"]["stem." + k], v), k
    # the core did train in stage 2
    pre_ck = load_latest_checkpoint(str(tmp_path / "pretrain"))
    assert not torch.equal(pre_ck["model"]["core.F"], main_ck["model"]["core.F"])
    # stage 2's actors shipped features, not frames: fewer bytes per trajectory than stage 1
    def bytes_per_traj(d):
        with open(d / "metrics.csv") as f:
            vals = [float(r["bytes_per_trajectory"]) for r in csv.DictReader(f) if r.get("bytes_per_trajectory")]
        return vals[-1]
    assert bytes_per_traj(tmp_path / "main") < bytes_per_traj(tmp_path / "pretrain")
    assert json.load(open(tmp_path / "pipeline.json"))["main"]["status"] == "finished"
    # a rerun of the finished pipeline runs nothing again
    again = pipeline(cfg)
    assert again["pretrain"]["skipped"] and again["main"]["skipped"]
    assert out["main"]["step"] == again["main"]["step"]


def test_stem_mismatch_is_a_clear_cli_error(tmp_path, capsys):
    cfg = load_config("configs/memory/watermaze_pipeline.yaml", SMALL + [f"run_dir={tmp_path / 'p'}"])
    from r2ac.runtime.pipeline import pretrain

    pretrain(cfg)
    stem = tmp_path / "p" / "stem.safetensors"
    assert stem.exists()
    code = main(["train", "configs/memory/watermaze_pipeline.yaml", *SMALL, f"run_dir={tmp_path / 'q'}",
                 f"stem.path={stem}", "stem.freeze=true", "env.options={size: 6, episode_length: 30}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "observation_shape" in err and "[3, 7, 7]" in err and "[3, 8, 8]" in err
    assert main(["pretrain", "configs/quickstart.yaml", f"run_dir={tmp_path / 'r'}", "total_steps=10"]) == 2
    assert "no stem to pretrain" in capsys.readouterr().err
