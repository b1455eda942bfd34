"""Training with the learner on a CUDA device (skipped without one): the local runtime's whole loop (CPU
actors, GPU learner, weights published back), its checkpoints (saved for the CPU), resume on the GPU and on
a CPU-only machine with counters and optimizer state continued, evaluation on the CPU, and the frozen-stem
pipeline."""

import os

import pytest
import torch

from r2ac.checkpoint import load_latest_checkpoint
from r2ac.config import load_config
from r2ac.evaluation import evaluate_checkpoint
from r2ac.runtime.local import train

SMALL = ["total_steps=3000", "env.num_envs=8", "learner.batch_size=8", "model.hidden_size=16",
         "logger.log_interval_s=0.01", "logger.tensorboard=false", "checkpoint.interval_s=0.2",
         "logger.progress_bar=false"]

RUNS = {"quickstart": [], "learner-sens": ["learner.sensitivities=learner"], "a2c": ["algo=a2c"],
        "pixel-cue": ["env.id=cue", "env.options={obs: pixels, size: 8, span: 20}"],
        "lstm-tbptt": ["model.core=lstm", "model.core_options={}", "model.learning=tbptt"]}


def _cfg(run_dir, device, *extra):
    return load_config("configs/quickstart.yaml", [f"run_dir={run_dir}", f"device={device}", *SMALL, *extra])


def _optimizer_steps(ck):
    return float(ck["extra"]["learner"]["optimizer"]["state"][0]["step"])


@pytest.mark.parametrize("run", list(RUNS))
def test_training_on_cuda_saves_for_the_cpu_and_resumes_anywhere(run, tmp_path, cuda):
    extra = RUNS[run]
    s = train(_cfg(tmp_path, "cuda", *extra))
    assert s["status"] == "finished" and s["step"] >= 3000
    for f in ("config.yaml", "metrics.csv", "learning_curve.png", "summary.json"):
        assert os.path.exists(tmp_path / f), f
    ck = load_latest_checkpoint(str(tmp_path), map_location=None)  # as saved
    updates = ck["extra"]["learner"]["updates"]
    assert updates > 0
    assert all(v.device.type == "cpu" for v in ck["model"].values())
    for v in ck["model"].values():
        assert torch.isfinite(v).all()
    target = ck["extra"]["learner"].get("target_net")  # the bootstraps' target network (target_tau > 0)
    assert target is not None and target.keys() == ck["model"].keys()
    assert all(v.device.type == "cpu" and torch.isfinite(v).all() for v in target.values())
    # resume on the GPU, then on the CPU (a checkpoint from a GPU run continued on a laptop)
    s2 = train(_cfg(tmp_path, "cuda", *extra, "total_steps=6000"), resume=True)
    ck2 = load_latest_checkpoint(str(tmp_path))
    assert s2["step"] >= 6000 and ck2["extra"]["learner"]["updates"] > updates
    assert _optimizer_steps(ck2) == _optimizer_steps(ck) + ck2["extra"]["learner"]["updates"] - updates
    s3 = train(_cfg(tmp_path, "cpu", *extra, "total_steps=9000"), resume=True)
    ck3 = load_latest_checkpoint(str(tmp_path))
    assert s3["step"] >= 9000 and ck3["extra"]["learner"]["updates"] > ck2["extra"]["learner"]["updates"]
    assert _optimizer_steps(ck3) == _optimizer_steps(ck2) + (ck3["extra"]["learner"]["updates"]
                                                             - ck2["extra"]["learner"]["updates"])
    if run != "a2c":  # r2ac eval evaluates IMPALA runs (an A2C run's metrics hold its returns)
        res = evaluate_checkpoint(str(tmp_path), sets=2, episodes=5)
        assert len(res["set_means"]) == 2


def test_frozen_stem_pipeline_on_cuda(tmp_path, cuda):
    """``r2ac pipeline`` with the learner on the GPU: TBPTT pretraining of the stem, then the main stage with
    the stem frozen (actors ship features) keeps the stem bit for bit."""
    from r2ac.agent.stem_io import read_stem_file
    from r2ac.runtime.pipeline import pipeline

    small = ["total_steps=2400", "pipeline.pretrain_steps=2400", "pipeline.pretrain_unroll_length=20",
             "env.num_envs=8", "learner.batch_size=8", "model.hidden_size=16", "model.stem_fc=16",
             "logger.tensorboard=false", "logger.progress_bar=false", "logger.log_interval_s=0.01",
             "env.options={size: 5, episode_length: 30}", "device=cuda"]
    out = pipeline(load_config("configs/memory/watermaze_pipeline.yaml", small + [f"run_dir={tmp_path}"]))
    assert out["main"]["status"] == "finished"
    tensors, _ = read_stem_file(str(tmp_path / "pretrain" / "stem.safetensors"))
    main_ck = load_latest_checkpoint(str(tmp_path / "main"))
    assert main_ck["extra"]["learner"]["updates"] > 0
    for k, v in tensors.items():
        assert torch.equal(main_ck["model"]["stem." + k], v), k


@pytest.mark.parametrize("env, options", [("tmaze", "{corridor_length: 2}"),
                                          ("gymc:Pendulum-v1", "{max_episode_steps: 6}")])
def test_ppo_on_cuda_resumes_on_the_cpu(env, options, tmp_path, cuda):
    """``algo=ppo`` with the network on the GPU (actions drawn by the run's CPU generator, discrete and
    continuous), then resumed on the CPU from its checkpoint."""
    from r2ac.runtime.ppo import train_ppo

    def cfg(device, steps):
        return load_config(None, ["algo=ppo", f"env.id={env}", "env.num_envs=2", f"env.options={options}",
                                  "ppo.rollout_length=8", "ppo.epochs=2", "ppo.minibatches=4", "ppo.encoder=[8]",
                                  "model.core=rtu", "model.hidden_size=4", "model.reward_input=false",
                                  f"total_steps={steps}", f"run_dir={tmp_path}", f"device={device}",
                                  "logger.tensorboard=false", "logger.progress_bar=false"])

    assert train_ppo(cfg("cuda", 32))["status"] == "finished"
    saved = load_latest_checkpoint(str(tmp_path), map_location=None)
    assert all(v.device.type == "cpu" for v in saved["model"].values())
    s = train_ppo(cfg("cpu", 64), resume=True)
    assert s["status"] == "finished" and s["step"] == 64
