"""Faults of the Ray runtime, each on a real local Ray instance (shared with tests/runtime/test_ray_runtime.py):
an actor process killed, an env that raises, malformed trajectories, non-finite losses, and the whole
training job killed then resumed.

The faulty env and worker below live in this module; Ray's worker processes import it from tests/runtime
(the ``ray_local`` fixture puts it on their PYTHONPATH): env id ``gym:test_runtime_faults:FaultyEnv``.
"""

import os
import signal
import subprocess
import sys
import time

import gymnasium
import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from test_ray_runtime import read_rows, tiny_cfg  # noqa: E402

from r2ac.checkpoint import load_latest_checkpoint  # noqa: E402
from r2ac.runtime import RunAborted  # noqa: E402
from r2ac.runtime.ray_runtime import RayRun, RolloutWorker  # noqa: E402

FAULTY = "gym:test_runtime_faults:FaultyEnv"


class FaultyEnv(gymnasium.Env):
    """A 6-step episode with 4 float features; reward 0.1 per step, 1 for action 1 at the last step, times
    ``reward_scale``. ``fail_after``: raise after that many steps of this instance (0 = never);
    ``nan_reward_every``: a NaN reward every that many steps (0 = never)."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, fail_after=0, nan_reward_every=0, reward_scale=1.0):
        self.fail_after, self.nan_reward_every, self.reward_scale = fail_after, nan_reward_every, reward_scale
        self.steps = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        if self.fail_after and self.steps >= self.fail_after:
            raise RuntimeError(f"injected env failure after {self.steps} steps")
        done = self.t >= 6
        reward = (1.0 if done and action == 1 else 0.1) * self.reward_scale
        if self.nan_reward_every and self.steps % self.nan_reward_every == 0:
            reward = float("nan")
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), reward, done, False, {}


class CorruptingWorker(RolloutWorker):
    """Ships a malformed trajectory every third rollout: wrong dtype, wrong shape, NaN in the state (as
    numpy arrays, the form trajectories travel in)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def rollout(self, version, weights, restart=False):
        traj, info = super().rollout(version, weights, restart)
        self.calls += 1
        if traj is not None and self.calls % 3 == 0:
            kind = (self.calls // 3) % 3
            if kind == 0:
                traj["action"] = traj["action"].astype(np.int32)
            elif kind == 1:
                traj["obs"] = traj["obs"][:, :, :2]
            else:
                traj["initial_state"] = {k: v * float("nan") for k, v in traj["initial_state"].items()}
        return traj, info


FAULTY_YAML = f"""
name: faulty
total_steps: 600
env: {{id: "{FAULTY}", num_envs: 2}}
model: {{stem: mlp, stem_channels: [], stem_fc: 8, core: elstm, hidden_size: 8, learning: rtrl}}
learner: {{unroll_length: 5, batch_size: 4}}
runtime: {{kind: ray, num_actors: 1, max_trajectories_in_flight: 2}}
logger: {{log_interval_s: 0.05, tensorboard: false, progress_bar: false}}
checkpoint: {{interval_s: 0.5}}
"""


def faulty_config_file(tmp_path):
    path = tmp_path / "faulty.yaml"
    path.write_text(FAULTY_YAML)
    return str(path)


def faulty_cfg(tmp_path, *extra):
    from r2ac.config import load_config

    return load_config(faulty_config_file(tmp_path), [f"run_dir={tmp_path / 'run'}", *extra])


def wait_for(predicate, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def events(tmp_path):
    path = tmp_path / "events.log"
    return path.read_text() if path.exists() else ""


def test_killed_actor_process_is_restarted_and_training_goes_on(ray_local, tmp_path):
    run = RayRun(tiny_cfg(tmp_path, "total_steps=10000000", "runtime.num_actors=1"))
    try:
        st = wait_for(lambda: (lambda s: s if s.get("updates", 0) >= 3 else None)(run.status()), 90, "updates")
        os.kill(st["worker_pids"][0], signal.SIGKILL)
        failed = wait_for(lambda: (lambda s: s if s["actor_failures"] >= 1 else None)(run.status()), 60,
                          "the learner to notice the dead actor")
        # the restarted process delivers again: counters keep advancing
        wait_for(lambda: (lambda s: s["trajectories_per_actor"][0] >= failed["trajectories_per_actor"][0] + 3
                          and s["updates"] > failed["updates"])(run.status()), 90, "training after the restart")
        run.stop()
        s = run.wait(timeout=60)
    finally:
        run.close()
    assert s["status"] == "interrupted" and s["actor_failures"] == 1 and s["lost_rollouts"] >= 1
    assert "actor 0 failed" in events(tmp_path)
    assert load_latest_checkpoint(str(tmp_path))["counters"]["actor_failures"] == 1


def test_env_that_raises_is_recreated_and_its_partial_trajectory_dropped(ray_local, tmp_path):
    run = RayRun(faulty_cfg(tmp_path, "total_steps=300", "env.options={fail_after: 23}"))
    tmp_path = tmp_path / "run"
    try:
        s = run.wait(timeout=120)
    finally:
        run.close()
    assert s["status"] == "finished" and s["step"] >= 300 and s["updates"] > 0
    # each env instance raises at its 23rd step: 2 good trajectories of 5 steps, then a failure, again and again
    assert s["env_failures"] >= 3 and s["trajectories"] >= 2 * s["env_failures"]
    log = events(tmp_path)
    assert "env failure in actor 0" in log and "injected env failure" in log and "dropped the partial" in log
    rows = read_rows(tmp_path / "metrics.csv")
    assert float(rows[-1]["env_failures"]) == s["env_failures"]


def test_malformed_trajectories_are_rejected_with_a_reason_never_trained_on(ray_local, tmp_path):
    # reward_input=false: a NaN reward reaches the learner instead of first poisoning the actor's policy
    run = RayRun(faulty_cfg(tmp_path, "total_steps=600", "env.options={nan_reward_every: 37}",
                            "model.reward_input=false"),
                 worker_cls=CorruptingWorker)
    tmp_path = tmp_path / "run"
    try:
        s = run.wait(timeout=120)
    finally:
        run.close()
    assert s["status"] == "finished" and s["updates"] > 0
    log = events(tmp_path)
    for reason in ("action has dtype torch.int32", "obs has shape", "non-finite values", "reward has non-finite"):
        assert reason in log, reason
    assert s["rejected_trajectories"] >= 4
    # never trained on: a NaN reward or state would have made the loss non-finite (a skipped update)
    assert s["skipped_updates"] == 0
    rows = read_rows(tmp_path / "metrics.csv")
    assert all(np.isfinite(float(r["total_loss"])) for r in rows if r.get("total_loss"))
    ck = load_latest_checkpoint(str(tmp_path))
    assert all(torch.isfinite(v).all() for v in ck["model"].values())
    assert ck["counters"]["rejected_trajectories"] == s["rejected_trajectories"]


def test_nonfinite_losses_skip_updates_then_stop_with_checkpoint(ray_local, tmp_path, capsys):
    from r2ac.cli import main

    # rewards of 1e30 (unclipped) make the value loss overflow to inf in float32: every update is non-finite
    rc = main(["train", faulty_config_file(tmp_path), f"run_dir={tmp_path / 'run'}", "total_steps=100000",
               "env.options={reward_scale: 1.0e+30}", "learner.reward_clip=0", "model.reward_input=false",
               "learner.max_nonfinite_updates=2"])
    tmp_path = tmp_path / "run"
    err = capsys.readouterr().err
    assert rc == 3
    assert "3 non-finite loss values in a row" in err and f"r2ac train --resume {tmp_path}" in err
    ck = load_latest_checkpoint(str(tmp_path))
    assert ck is not None and ck["extra"]["learner"]["skipped"] == 3 and ck["extra"]["learner"]["updates"] == 0
    summary = (tmp_path / "summary.json").read_text()
    assert "stopped: non-finite loss" in summary


def test_killed_training_job_resumes_from_its_last_checkpoint(ray_local, tmp_path):
    from r2ac.cli import main

    args = ["train", "configs/quickstart.yaml", "runtime.kind=ray", f"run_dir={tmp_path}", "total_steps=10000000",
            "env.num_envs=4", "env.options={corridor_length: 4}", "learner.unroll_length=5",
            "learner.batch_size=8", "model.hidden_size=8", "model.stem_fc=8", "logger.tensorboard=false",
            "logger.progress_bar=false", "checkpoint.interval_s=0.3", "logger.log_interval_s=0.1"]
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.Popen([sys.executable, "-m", "r2ac.cli", *args, "--address", ray_local], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        ck = wait_for(lambda: (lambda c: c if c and c["extra"]["learner"]["updates"] >= 5 else None)(
            load_latest_checkpoint(str(tmp_path))), 120, "a checkpoint with updates")
    finally:
        proc.kill()  # SIGKILL: no final checkpoint; Ray then kills the job's learner and actors
        err = proc.communicate(timeout=30)[1].decode(errors="replace")
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    # the learner resource is free again once Ray has killed the dead job's learner process
    wait_for(lambda: ray.available_resources().get("learner", 0) >= 1, 60, "the old learner to go away")
    last = load_latest_checkpoint(str(tmp_path))
    step0, updates0 = last["counters"]["step"], last["extra"]["learner"]["updates"]
    assert step0 >= ck["counters"]["step"]
    rc = main(["train", "--resume", str(tmp_path), f"total_steps={step0 + 1000}", "--address", ray_local])
    assert rc == 0
    new = load_latest_checkpoint(str(tmp_path))
    assert new["counters"]["step"] >= step0 + 1000 and new["extra"]["learner"]["updates"] > updates0
    opt0 = float(last["extra"]["learner"]["optimizer"]["state"][0]["step"])
    opt1 = float(new["extra"]["learner"]["optimizer"]["state"][0]["step"])
    assert opt1 == opt0 + new["extra"]["learner"]["updates"] - updates0  # optimizer state continued
    steps = [int(r["step"]) for r in read_rows(tmp_path / "metrics.csv")]
    assert steps == sorted(steps) and len(set(steps)) == len(steps) and steps[-1] >= step0 + 1000


def test_killed_learner_process_ends_the_run_with_a_resume_hint(ray_local, tmp_path):
    run = RayRun(tiny_cfg(tmp_path, "total_steps=10000000", "runtime.num_actors=1"))
    try:
        wait_for(lambda: (lambda c: c and c["extra"]["learner"]["updates"] > 0)(load_latest_checkpoint(str(tmp_path))),
                 90, "a checkpoint")
        os.kill(run.status()["pid"], signal.SIGKILL)
        with pytest.raises(RunAborted, match=f"r2ac train --resume {tmp_path}"):
            run.wait(timeout=60)
    finally:
        run.close()
    assert load_latest_checkpoint(str(tmp_path))["extra"]["learner"]["updates"] > 0
    # its actors die with it (Ray's ownership): the cluster's resources come back
    wait_for(lambda: ray.available_resources().get("learner", 0) >= 1, 60, "the learner resource")


def test_stop_status_names_how_a_run_ended():
    from r2ac.agent.learner import NonFiniteLossError
    from r2ac.runtime import RunAborted, stop_status

    assert stop_status(NonFiniteLossError("x")) == "stopped: non-finite loss"
    assert stop_status(RunAborted("x")) == "stopped: rollouts keep failing"
    assert stop_status(KeyboardInterrupt()) == "interrupted"
    assert stop_status(ValueError("x")) == "failed: ValueError"  # a crash is never reported as finished


def test_read_curve_skips_rows_without_a_return(tmp_path):
    from r2ac.experiments.common import read_curve

    p = tmp_path / "metrics.csv"
    p.write_text("step,episode_return,x\n10,1.5,0\n20,,0\n30,nan,0\n40,2.5,0\n")
    x, y = read_curve(str(p))
    assert x.tolist() == [10.0, 40.0] and y.tolist() == [1.5, 2.5]
