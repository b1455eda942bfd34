"""The Ray runtime and `r2ac sweep` with the learner on a CUDA device (skipped without Ray or a GPU, as in
CI): the learner process gets the GPU that ``runtime.learner_gpus`` reserves and trains there, its
checkpoints are saved for the CPU and resume on Ray's GPU learner and then on a laptop's CPU with the
counters and optimizer steps continued; without a reservation the learner sees no GPU; sweep runs with
``device=cuda`` each hold one GPU."""

import csv
import json
import os

import pytest
import torch

ray = pytest.importorskip("ray")

from r2ac.checkpoint import load_latest_checkpoint  # noqa: E402
from r2ac.cli import main  # noqa: E402
from r2ac.config import load_config  # noqa: E402

TINY = ["env.num_envs=4", "env.options={corridor_length: 4}", "learner.unroll_length=5", "learner.batch_size=8",
        "model.hidden_size=8", "model.stem_fc=8", "logger.log_interval_s=0.05", "logger.tensorboard=false",
        "logger.progress_bar=false", "checkpoint.interval_s=0.5"]


def _ray_cfg(run_dir, *extra):
    return load_config("configs/quickstart.yaml", ["runtime.kind=ray", f"run_dir={run_dir}", "runtime.num_actors=2",
                                                   "runtime.max_trajectories_in_flight=2", *TINY, *extra])


def _steps(ck):
    return float(ck["extra"]["learner"]["optimizer"]["state"][0]["step"])


def test_ray_learner_on_the_gpu_it_reserves_then_resume_on_gpu_and_cpu(ray_local, cuda, tmp_path):
    from r2ac.runtime.local import train as train_local
    from r2ac.runtime.ray_runtime import train

    if ray.cluster_resources().get("GPU", 0) < 1:
        pytest.skip("the local Ray instance offers no GPU")
    s = train(_ray_cfg(tmp_path, "device=cuda", "runtime.learner_gpus=1", "total_steps=2000"))
    assert s["status"] == "finished" and s["step"] >= 2000 and s["updates"] > 0
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["learner_device"].startswith("cuda") and len(summary["learner_gpu_ids"]) == 1, summary
    ck = load_latest_checkpoint(str(tmp_path), map_location=None)  # as saved: for the CPU
    assert all(v.device.type == "cpu" and torch.isfinite(v).all() for v in ck["model"].values())
    u1 = ck["extra"]["learner"]["updates"]
    assert u1 == s["updates"] and ck["counters"]["step"] == s["step"]

    s2 = train(_ray_cfg(tmp_path, "device=cuda", "runtime.learner_gpus=1", "total_steps=3000"), resume=True)
    ck2 = load_latest_checkpoint(str(tmp_path))
    u2 = ck2["extra"]["learner"]["updates"]
    assert s2["step"] >= 3000 and u2 > u1 and _steps(ck2) == _steps(ck) + u2 - u1
    # the same run continued on a machine without a GPU: the local runtime on the CPU
    cpu = load_config(str(tmp_path / "config.yaml"), ["runtime.kind=local", "device=cpu", "runtime.learner_gpus=0",
                                                      "total_steps=4000"])
    s3 = train_local(cpu, resume=True)
    ck3 = load_latest_checkpoint(str(tmp_path))
    u3 = ck3["extra"]["learner"]["updates"]
    assert s3["step"] >= 4000 and u3 > u2 and _steps(ck3) == _steps(ck2) + u3 - u2


def test_ray_learner_without_a_reservation_sees_no_gpu(ray_local, cuda, tmp_path):
    """device=auto picks the GPU only where Ray gave the learner process one."""
    from r2ac.runtime.ray_runtime import train

    s = train(_ray_cfg(tmp_path, "device=auto", "runtime.learner_gpus=0", "total_steps=1000"))
    assert s["status"] == "finished"
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["learner_device"] == "cpu" and summary["learner_gpu_ids"] == [], summary
    if ray.cluster_resources().get("GPU", 0) >= 1:
        s = train(_ray_cfg(tmp_path / "auto_gpu", "device=auto", "runtime.learner_gpus=1", "total_steps=1000"))
        summary = json.load(open(tmp_path / "auto_gpu" / "summary.json"))
        assert s["status"] == "finished" and summary["learner_device"].startswith("cuda"), summary


def test_sweep_runs_on_the_gpu_one_at_a_time(ray_local, cuda, tmp_path, capsys):
    if ray.cluster_resources().get("GPU", 0) < 1:
        pytest.skip("the local Ray instance offers no GPU")
    out = tmp_path / "s"
    code = main(["sweep", "quickstart", "--seeds", "0,1", "device=cuda", "runtime.torch_threads=1",
                 "total_steps=600", *TINY, "--name", "gpu", "--dir", str(out)])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(r["status"] == "finished" and int(r["steps"]) >= 600 for r in rows), rows
    for r in rows:
        ck = load_latest_checkpoint(r["run_dir"])
        assert ck["extra"]["learner"]["updates"] > 0
        assert os.path.exists(os.path.join(r["run_dir"], "learning_curve.png"))
