"""The Ray runtime on a real local Ray instance: training end to end, resume, back-pressure, versioned
weight broadcast, metrics, and how the driver finds (or starts) its cluster.

One Ray instance serves this module and tests/runtime/test_runtime_faults.py (the session fixture
``ray_local`` of tests/runtime/conftest.py); it offers the custom resource ``learner`` like the compose and
cluster configs, so the learner process is placed with it for real.
"""

import csv
import importlib.util
import os
import time

import pytest
import torch

ray = pytest.importorskip("ray")

from r2ac.config import config_to_dict, load_config  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tiny_cfg(tmp_path, *extra):
    """A few-second run: T-maze, 4 envs per actor, M=5, batches of 8 columns, a 8-unit eLSTM (RTRL)."""
    return load_config("configs/quickstart.yaml", [
        "runtime.kind=ray", f"run_dir={tmp_path}", "total_steps=2000", "env.num_envs=4",
        "env.options={corridor_length: 4}", "learner.unroll_length=5", "learner.batch_size=8",
        "model.hidden_size=8", "model.stem_fc=8", "logger.log_interval_s=0.05", "logger.tensorboard=false",
        "logger.progress_bar=false", "checkpoint.interval_s=0.5", "runtime.num_actors=2",
        "runtime.max_trajectories_in_flight=2", *extra])


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_train_on_ray_end_to_end_then_resume(ray_local, tmp_path):
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.runtime.ray_runtime import RayRun, train

    cfg = tiny_cfg(tmp_path, "logger.wandb=true", "logger.wandb_mode=offline")  # W&B runs in the learner process
    run = RayRun(cfg)
    seen = []
    while not ray.wait([run.result], timeout=0.2)[0]:
        seen.append(run.status())
    s = run.wait(timeout=120)
    run.close()
    assert s["status"] == "finished" and s["step"] >= 2000 and s["updates"] > 0
    assert s["rejected_trajectories"] == s["env_failures"] == s["actor_failures"] == 0
    # back-pressure: never more than K unconsumed rollouts per actor
    training = [st for st in seen if st.get("phase") == "training"]
    assert training and all(st["max_in_flight_per_actor"] <= 2 and st["rollouts_in_flight"] <= 4 for st in training)
    assert all(n > 0 for n in training[-1]["trajectories_per_actor"])  # both actors delivered
    for f in ("config.yaml", "metrics.csv", "learning_curve.png", "summary.json"):
        assert (tmp_path / f).exists(), f
    rows = read_rows(tmp_path / "metrics.csv")
    for key in ("steps_per_s", "env_frames_per_s", "learner_steps_per_s", "learner_updates_per_s", "policy_lag_mean",
                "policy_lag_max", "bytes_per_trajectory", "unroll_length", "rtrl", "episode_return",
                "rollouts_in_flight", "actor_steps_per_s", "total_loss"):
        assert key in rows[0], key
    lag = [(float(r["policy_lag_mean"]), float(r["policy_lag_max"])) for r in rows if r["policy_lag_mean"]]
    assert lag and all(0 <= m <= x for m, x in lag)
    assert all(float(r["rollouts_in_flight"]) <= 4 for r in rows)
    assert {r["unroll_length"] for r in rows} == {"5.0"} and {r["rtrl"] for r in rows} == {"1.0"}
    # bytes of one trajectory: 6 frames x 4 envs of uint8 obs and the step data, plus the RTRL state
    per_traj = float(rows[-1]["bytes_per_trajectory"])
    assert 6 * 4 * 3 * 3 * 6 < per_traj < 200_000
    # W&B (offline) got the learning mode and M as tags, and the system metrics (where wandb is installed, as
    # `make install` does; a GPU machine's image may lack it)
    if importlib.util.find_spec("wandb") is not None:
        wandb_file = next((tmp_path / "wandb").glob("offline-run-*/run-*.wandb")).read_bytes()
        assert b"learning:rtrl" in wandb_file and b"M:5" in wandb_file and b"env_frames_per_s" in wandb_file
    ck = load_latest_checkpoint(str(tmp_path))
    updates = ck["extra"]["learner"]["updates"]
    assert updates == s["updates"] and ck["counters"]["step"] == s["step"]

    # resume on the same cluster (train() reuses this process's connection and leaves it open)
    s2 = train(tiny_cfg(tmp_path, "total_steps=3000"), resume=True)
    assert ray.is_initialized()
    ck2 = load_latest_checkpoint(str(tmp_path))
    assert s2["step"] >= 3000 and ck2["extra"]["learner"]["updates"] > updates
    steps1 = ck["extra"]["learner"]["optimizer"]["state"][0]["step"]
    steps2 = ck2["extra"]["learner"]["optimizer"]["state"][0]["step"]
    assert float(steps2) == float(steps1) + (ck2["extra"]["learner"]["updates"] - updates)
    steps = [int(r["step"]) for r in read_rows(tmp_path / "metrics.csv")]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)


def test_learner_sensitivities_on_ray(ray_local, tmp_path):
    """learner.sensitivities=learner with two actors and a real policy lag: the learner trains continuing
    columns on its own sensitivities (batches of one actor's 4 columns, so each trajectory's predecessor
    was trained on in an earlier update)."""
    from r2ac.runtime.ray_runtime import train

    s = train(tiny_cfg(tmp_path, "learner.sensitivities=learner", "learner.batch_size=4"))
    assert s["status"] == "finished"
    rows = read_rows(tmp_path / "metrics.csv")
    frac = [float(r["learner_sensitivities_frac"]) for r in rows if r.get("learner_sensitivities_frac")]
    assert frac and max(frac) > 0.5 and all(0 <= f <= 1 for f in frac)
    assert any(float(r["policy_lag_max"]) > 0 for r in rows if r["policy_lag_max"])


def test_time_limit_on_ray_stops_with_a_checkpoint(ray_local, tmp_path):
    """``r2ac train --minutes`` on Ray: the learner process ends the run at the limit, with a final checkpoint
    at the summary's step."""
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.runtime.ray_runtime import train

    s = train(tiny_cfg(tmp_path, "total_steps=1000000000", "checkpoint.interval_s=100000"), time_limit_s=3.0)
    assert s["status"] == "stopped: time limit" and 0 < s["step"] < 1000000000
    assert load_latest_checkpoint(str(tmp_path))["counters"]["step"] == s["step"]


def test_stop_success_on_ray_ends_the_run_when_solved(ray_local, tmp_path):
    """``stop.success`` on Ray: the learner process ends the run once the episodes its actors sent reach it
    (random play wins the 4-step T-maze about half the time), with ``stop_reached`` in the summary."""
    from r2ac.runtime.ray_runtime import train

    s = train(tiny_cfg(tmp_path, "total_steps=1000000000", "stop.success=0.3", "stop.window_episodes=20",
                       "stop.hold_steps=200"), time_limit_s=60.0)
    assert s["status"] == "stopped: solved" and s["step"] >= s["stop_reached"]["step"] + 200
    assert s["stop_reached"]["mean"] >= 0.3


def test_worker_loads_weights_only_when_the_version_changes(ray_local, tmp_path):
    from r2ac.runtime import build_net
    from r2ac.runtime.ray_runtime import RolloutWorker

    cfg = tiny_cfg(tmp_path)
    w = RolloutWorker(config_to_dict(cfg), 0, seed=0)
    spec = w.spec()
    net = build_net(cfg, spec["observation_shape"], spec["num_actions"])
    v3 = ray.put({k: v.detach() for k, v in net.state_dict().items()})
    traj, info = w.rollout(3, [v3])
    assert info["weight_loads"] == 1 and traj["version"].tolist() == [3] * 4
    assert all(torch.equal(a, b) for a, b in zip(w.actor.net.state_dict().values(), net.state_dict().values()))
    traj, info = w.rollout(3, [v3])
    assert info["weight_loads"] == 1  # same version: nothing fetched
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    v4 = ray.put({k: v.detach() for k, v in net.state_dict().items()})
    traj, info = w.rollout(4, [v4], restart=True)
    assert info["weight_loads"] == 2 and traj["version"].tolist() == [4] * 4
    assert traj["done"][0].all()  # restart: every env starts a new episode
    assert all(torch.equal(a, b) for a, b in zip(w.actor.net.state_dict().values(), net.state_dict().values()))
    w.actor.close()


def test_address_resolution_and_local_instance_settings(monkeypatch, tmp_path):
    from r2ac.runtime.ray_runtime import init_kwargs, resolve_address

    cfg = tiny_cfg(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_address(None, cfg) is None
    kw = init_kwargs(cfg, None)
    assert kw["dashboard_host"] == "127.0.0.1"  # the dashboard binds to localhost unless configured
    assert kw["num_cpus"] >= cfg.runtime.num_actors + 1 and "address" not in kw
    assert not any("auth" in k.lower() for k in kw)  # token authentication stays as Ray sets it
    assert init_kwargs(tiny_cfg(tmp_path, "runtime.dashboard_host=0.0.0.0"), None)["dashboard_host"] == "0.0.0.0"
    cfg_addr = tiny_cfg(tmp_path, "runtime.address=10.0.0.1:6379")
    assert resolve_address(None, cfg_addr) == "10.0.0.1:6379"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    assert resolve_address(None, cfg_addr) == "10.0.0.2:6379"
    assert resolve_address("auto", cfg_addr) == "auto"
    assert init_kwargs(cfg, "auto") == {"address": "auto", "log_to_driver": True}


def test_learner_placement_options(ray_local, tmp_path):
    from r2ac.runtime.ray_runtime import learner_options

    opts = learner_options(tiny_cfg(tmp_path))
    assert opts["resources"] == {"learner": 1} and "num_gpus" not in opts  # this cluster offers "learner"
    assert learner_options(tiny_cfg(tmp_path, "runtime.learner_gpus=1"))["num_gpus"] == 1


def test_placement_report_names_what_the_run_waits_for_and_the_fix(tmp_path):
    from r2ac.runtime.ray_runtime import placement_report

    cfg = tiny_cfg(tmp_path, "runtime.num_actors=4")
    few = placement_report(cfg, {"phase": "placing actors", "actors_up": 2, "num_actors": 4}, 31,
                           {"CPU": 3.0, "learner": 1.0}, {"CPU": 0.0}, 2)
    assert "after 31 s" in few and "2 of 4 are up" in few and "(5 CPUs)" in few, few
    assert "3 CPUs in all, 0 free on 2 nodes" in few and "lower runtime.num_actors to 2" in few, few
    gpu = placement_report(tiny_cfg(tmp_path, "runtime.learner_gpus=1"), {"phase": "unresponsive"}, 60,
                           {"CPU": 8.0}, {"CPU": 8.0}, 1)
    assert "its learner process" in gpu and "1 GPU for the learner" in gpu and "0 GPUs (0 free)" in gpu, gpu
    assert "runtime.learner_gpus=0" in gpu and "num_actors to" not in gpu and "on 1 node." in gpu, gpu
    busy = placement_report(cfg, {"phase": "placing actors", "actors_up": 0}, 40, {"CPU": 16.0}, {"CPU": 0.0}, 3)
    assert "Other work holds its CPUs now" in busy, busy


def test_a_run_with_more_actors_than_cpus_says_so_and_stops_cleanly(ray_local, tmp_path, monkeypatch, capsys):
    """Ray queues an actor until a node has a CPU for it: a run that asks for more than the cluster has
    waits, and the driver says what for and what would fix it, instead of hanging silently; a stop then
    ends the wait with a clear error and frees the CPUs. (ray_local has 4 CPUs: the learner takes one, so
    3 of 5 actors start.)"""
    import r2ac.runtime.ray_runtime as rr
    from r2ac.runtime import RunAborted

    monkeypatch.setattr(rr, "PLACEMENT_WARN_S", 2.0)
    run = rr.RayRun(tiny_cfg(tmp_path, "runtime.num_actors=5"))
    try:
        deadline, out = time.time() + 240, ""  # a loaded machine can take a minute to start the learner
        while "3 of 5 are up" not in out and time.time() < deadline:
            with pytest.raises(TimeoutError):
                run.wait(timeout=6, show_progress=True)
            out = capsys.readouterr().out.strip().splitlines()[-1]
            assert out.startswith("[train] still waiting after"), out
        assert "its actors: 3 of 5 are up" in out, out
        assert "(6 CPUs)" in out and "4 CPUs in all" in out and "lower runtime.num_actors to 3" in out, out
        run.stop()
        with pytest.raises(RunAborted, match="stopped while waiting for Ray to place the actors"):
            run.wait(timeout=60)
    finally:
        run.close()
    deadline = time.time() + 30  # the learner's finally killed its actors: the CPUs come back
    while ray.available_resources().get("CPU", 0) < 4 and time.time() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU", 0) == 4


def test_learner_device_takes_a_gpu_only_where_ray_gave_one(monkeypatch, tmp_path):
    """Ray leaves every GPU visible to a process that reserved none (seen on an H100 machine): device=auto
    must not take one there. Here CUDA is faked as present; tests/runtime/test_ray_cuda.py runs it for real."""
    import r2ac.runtime.ray_runtime as rr

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(rr.ray, "get_gpu_ids", lambda: [])
    assert rr.learner_device(tiny_cfg(tmp_path, "device=auto")) == torch.device("cpu")
    assert rr.learner_device(tiny_cfg(tmp_path, "device=cpu")) == torch.device("cpu")
    monkeypatch.setattr(rr.ray, "get_gpu_ids", lambda: [0])
    assert rr.learner_device(tiny_cfg(tmp_path, "device=auto", "runtime.learner_gpus=1")) == torch.device("cuda")
    assert rr.learner_device(tiny_cfg(tmp_path, "device=cuda", "runtime.learner_gpus=1")) == torch.device("cuda")


def test_cli_dispatches_runtime_kind_ray_with_address(monkeypatch, tmp_path, capsys):
    import importlib.util

    import r2ac.runtime.ray_runtime as rr
    from r2ac.cli import main

    spec = importlib.util.spec_from_file_location("job_entry_for_ray_test",
                                                  os.path.join(REPO, "deploy", "job_entry.py"))
    job_entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job_entry)
    build_argv = job_entry.build_argv

    calls = []
    limits = []
    monkeypatch.setattr(rr, "train", lambda cfg, resume, address, time_limit_s=None: limits.append(time_limit_s)
                        or calls.append((cfg, resume, address)) or {"ok": 1})
    assert main(["train", "configs/quickstart.yaml", "runtime.kind=ray", f"run_dir={tmp_path}",
                 "--address", "10.1.2.3:6379"]) == 0
    cfg, resume, address = calls[-1]
    assert cfg.runtime.kind == "ray" and not resume and address == "10.1.2.3:6379"
    # what deploy/job_entry.py runs on a cluster
    assert main(build_argv(["configs/quickstart.yaml", f"run_dir={tmp_path}"])) == 0
    assert calls[-1][0].runtime.kind == "ray" and calls[-1][2] == "auto"
    assert main(["train", "configs/quickstart.yaml", "runtime.kind=ray", f"run_dir={tmp_path}"]) == 0
    assert calls[-1][2] is None  # no flag: RAY_ADDRESS, runtime.address, else a local instance
    assert main(["train", "configs/quickstart.yaml", "runtime.kind=ray", f"run_dir={tmp_path}", "--minutes", "2"]) == 0
    assert limits == [None, None, None, 120.0]  # --minutes reaches the Ray runtime as seconds
    capsys.readouterr()


def test_bench_system_smoke(ray_local, tmp_path, capsys):
    from r2ac.bench.system import main

    assert main(["--envs", "tmaze", "--seconds", "2", "--actors", "1", "--out", str(tmp_path)]) == 0
    rows = read_rows(tmp_path / "system.csv")
    assert [r["mode"] for r in rows] == ["raw", "actor", "local", "ray-1"]
    assert all(float(r["steps_per_s"]) > 0 for r in rows) and rows[0]["pct_of_raw"] == "100.0"
    assert float(rows[-1]["bytes_per_trajectory"]) > 0 and rows[-1]["policy_lag_mean"] != ""
    assert (tmp_path / "system.png").stat().st_size > 0
    assert "ray-1" in capsys.readouterr().out
    # overrides reach every run (here a smaller batch: more updates per step); a wrong key stops before Ray
    assert main(["--envs", "tmaze", "--seconds", "2", "--actors", "1", "--modes", "ray", "--out",
                 str(tmp_path / "o"), "learner.batch_size=4"]) == 0
    assert load_config(str(tmp_path / "o" / "runs" / "tmaze-ray-1" / "config.yaml")).learner.batch_size == 4
    with pytest.raises(SystemExit):
        main(["--envs", "tmaze", "--out", str(tmp_path / "x"), "learner.no_such_key=1"])
    assert "no_such_key" in capsys.readouterr().err
