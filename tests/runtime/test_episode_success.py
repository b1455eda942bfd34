"""A task's success where its return is not its success rate: a ``gym:`` env's ``info["success"]`` at an episode's
end reaches the vector env's info, the actor's trajectories (``episode_success``), the log (its mean beside the
return) and ``r2ac bench memory``, which judges a ``gym:`` task by it (its curve, its fresh envs) and every other
task by its return; an env that reports none, and runs logged before, read as before; a success that is not one
number is refused by name."""

import csv
import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from r2ac.agent.actor import episode_success
from r2ac.agent.trajectory import concat, validate
from r2ac.bench.memory import read_success_curve, success_column, success_label
from r2ac.envs import make_vec_env
from r2ac.runtime.session import RecentEpisodes


class Ends(gym.Env):
    """Episodes of 2 steps whose last step pays 5 and reports ``success`` (an action of 1 succeeds), or, with
    ``report`` off, nothing; ``bad``: a success that is not one number."""

    def __init__(self, report: bool = True, bad: bool = False):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.report, self.bad, self.t = report, bad, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t < 2:
            return np.zeros(2, np.float32), 0.0, False, False, {"success": 7.0}  # not at an end: not read
        info = {"success": [1, 0] if self.bad else bool(action == 1)} if self.report else {}
        return np.zeros(2, np.float32), 5.0, True, False, info


def test_a_gym_envs_success_reaches_the_vector_info_at_episode_ends_only():
    venv = make_vec_env("gym:" + __name__ + ":Ends", 4, 0)
    venv.reset()
    _, _, done, info = venv.step(np.array([1, 0, 1, 0]))
    assert not done.any() and "success" not in info
    _, reward, done, info = venv.step(np.array([1, 0, 1, 0]))
    assert done.all() and list(reward) == [5.0] * 4
    np.testing.assert_array_equal(info["success"], [1.0, 0.0, 1.0, 0.0])
    silent = make_vec_env("gym:" + __name__ + ":Ends", 2, 0, report=False)
    silent.reset()
    silent.step(np.zeros(2, int))
    assert "success" not in silent.step(np.zeros(2, int))[3]
    bad = make_vec_env("gym:" + __name__ + ":Ends", 2, 0, bad=True)
    bad.reset()
    bad.step(np.zeros(2, int))
    with pytest.raises(ValueError, match=r"info\['success'\] at an episode's end must be one number or bool"):
        bad.step(np.zeros(2, int))


class Numbers(Ends):
    """Episodes of ``length`` steps whose end reports numbers of several kinds and things that are not one number
    (``Ends``'s spaces and reset)."""

    def __init__(self, length: int = 1):
        super().__init__()
        self.length = length

    def step(self, action):
        self.t += 1
        if self.t < self.length:
            return np.zeros(2, np.float32), 0.0, False, False, {"apples": 99}  # not at an end: not read
        info = {"apples": 3, "found": True, "score": np.float32(0.5), "level": np.array(2), "name": "x",
                "path": [1, 2], "grid": np.zeros(2), "stats": {"a": 1.0}, "episode_return": 123.0, "truncated": 7}
        return np.zeros(2, np.float32), 1.0, True, False, info


def test_a_gym_envs_other_numbers_at_episode_ends_reach_the_vector_info_and_r2ac_eval():
    """Every other key whose value is one number or bool, float64 with NaN where no episode ended; the vector's own
    keys keep their values, and values that are not one number are left out; the evaluation's episode_info has
    their means (what r2ac eval prints)."""
    from r2ac.evaluation import play, summarize_episode_infos

    venv = make_vec_env("gym:" + __name__ + ":Numbers", 2, 0)
    venv.reset()
    _, _, done, info = venv.step(np.zeros(2, int))
    assert done.all() and set(info) >= {"apples", "found", "score", "level"}
    assert not set(info) & {"name", "path", "grid", "stats"}
    for key, want in (("apples", 3.0), ("found", 1.0), ("score", 0.5), ("level", 2.0)):
        assert info[key].dtype == np.float64 and list(info[key]) == [want, want], key
    assert list(info["episode_return"]) == [1.0, 1.0]  # the vector's own keys keep their values
    assert info["truncated"].dtype == bool and not info["truncated"].any()
    uneven = make_vec_env("gym:" + __name__ + ":Numbers", 2, 0, length=2)
    uneven.reset()
    assert "apples" not in uneven.step(np.zeros(2, int))[3]

    class Random:
        def initial_state(self, n):
            return None

        def act(self, obs, state, reward=None, done=None, greedy=False):
            return np.zeros(len(obs), int), state

    out = play(Random(), venv, 4)
    assert summarize_episode_infos(out["infos"])["apples"] == {"mean": 3.0, "count": 4}


def test_the_actor_keeps_success_where_episodes_ended_and_nan_elsewhere():
    done = np.array([True, False, True])
    out = episode_success({"success": np.array([1.0, np.nan, 0.0])}, done, 3)
    assert out.dtype == torch.float64 and out[0] == 1.0 and out[2] == 0.0 and math.isnan(out[1])
    assert torch.isnan(episode_success({}, done, 3)).all()  # an env that reports none
    # the built-in tasks report success too, NaN where no episode ended
    venv = make_vec_env("cue", 2, 0, span=1, obs="vector")
    venv.reset()
    ends = []
    for _ in range(6):
        _, _, d, info = venv.step(np.zeros(2, int))
        ends.append(episode_success(info, d, 2)[d])
    assert torch.cat(ends).numel() > 0 and not torch.isnan(torch.cat(ends)).any()


def _traj(success, M=2, B=2):
    traj = {"obs": torch.zeros(M + 1, B, 3), "reward": torch.zeros(M + 1, B), "done": torch.zeros(M + 1, B, dtype=bool),
            "action": torch.zeros(M + 1, B, dtype=torch.int64), "policy_logits": torch.zeros(M + 1, B, 2),
            "episode_return": torch.full((M + 1, B), float("nan"), dtype=torch.float64),
            "episode_length": torch.zeros(M + 1, B, dtype=torch.int64), "initial_state": {},
            "version": torch.zeros(B, dtype=torch.int64)}
    traj["episode_return"][1] = torch.tensor([3.0, 1.0], dtype=torch.float64)
    traj["episode_length"][1] = torch.tensor([4, 4])
    if success is not None:
        traj["episode_success"] = torch.full((M + 1, B), float("nan"), dtype=torch.float64)
        traj["episode_success"][1] = torch.tensor(success, dtype=torch.float64)
    return traj


def test_nan_success_passes_the_trajectory_check_and_batches_keep_it_where_all_parts_have_it():
    a, b = _traj([1.0, 0.0]), _traj([float("nan"), 1.0])
    assert validate(a, unroll_length=2, num_actions=2, state_spec={}) is None
    assert torch.equal(concat([a, b])["episode_success"][1, [0, 1, 3]], torch.tensor([1.0, 0.0, 1.0],
                                                                                     dtype=torch.float64))
    assert "episode_success" not in concat([a, _traj(None)])


def test_the_log_row_has_the_mean_success_beside_the_return():
    episodes = RecentEpisodes()
    episodes.add(_traj([1.0, 0.0]))
    episodes.add(_traj([float("nan"), 1.0]))  # an episode that reported none is left out of the success only
    row = episodes.pop_metrics()
    assert row["episode_return"] == 2.0 and row["episodes"] == 4
    assert row["episode_success"] == pytest.approx(2 / 3)
    episodes.add(_traj(None))
    assert "episode_success" not in episodes.pop_metrics()  # trajectories without it: no column
    assert episodes.pop_metrics() == {}


def _metrics(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "wall_time", "episode_return", "episodes", "episode_success"])
        w.writerows(rows)


def test_the_bench_judges_a_gym_task_by_its_success_and_the_rest_by_the_return(tmp_path):
    assert success_column("gym:examples.key_apples:KeyApples") == "episode_success"
    assert success_label("gym:examples.key_apples:KeyApples") == "training success (info['success'])"
    assert success_label("cue-pixels") == "training success (return)"
    assert success_column("cue-pixels") == success_column("watermaze") == success_column("popgym:RepeatFirstEasy") \
        == "episode_return"
    f = tmp_path / "metrics.csv"
    _metrics(f, [(100, 0.0, 4.2, 10, 0.3), (200, 1.0, 4.9, 20, 0.9)])
    assert [v for *_, v in read_success_curve(str(f), window=1, column="episode_success")] == [0.3, 0.9]
    assert [v for *_, v in read_success_curve(str(f), window=1)] == [4.2, 4.9]
    _metrics(f, [(100, 0.0, 0.5, 10, ""), (200, 1.0, 1.0, 20, "")])  # an env that reports none: the return
    assert [v for *_, v in read_success_curve(str(f), window=1, column="episode_success")] == [0.5, 1.0]


def test_fresh_envs_of_a_gym_task_are_judged_by_success(tmp_path, monkeypatch):
    import r2ac.checkpoint
    import r2ac.evaluation
    from r2ac.bench.memory import fresh_return
    from r2ac.config import load_config, save_config

    def fake_evaluate(run_dir, sets, episodes, seed, greedy, num_envs, video, log):
        return {"mean": 4.5, "episodes": episodes, "step": 1, "episode_info": {"success": {"mean": 0.75, "count": 8}}}

    monkeypatch.setattr(r2ac.evaluation, "evaluate_run", fake_evaluate)
    monkeypatch.setattr(r2ac.checkpoint, "latest_checkpoint", lambda d: str(d))
    run = tmp_path / "run"
    run.mkdir()
    save_config(load_config("configs/quickstart.yaml", ["env.num_envs=4"]), run / "config.yaml")
    assert fresh_return(str(run), "gym:examples.key_apples:KeyApples") == 0.75
    assert fresh_return(str(run), "cue-pixels") == 4.5
    assert json.loads((run / "fresh.json").read_text())["success"] == 0.75
    (run / "fresh.json").write_text(json.dumps({"mean": 0.5}))  # judged before success was kept: the return
    assert fresh_return(str(run), "gym:examples.key_apples:KeyApples") == 0.5


def test_bench_memory_judges_key_apples_by_its_success_not_its_return(tmp_path):
    """A real short run of examples/key_apples.py whose apples pay 1 each: the log has both columns, the return
    counts the apples (above the success), and the bench's row reads the success."""
    from r2ac.bench.memory import main

    out = tmp_path / "apples"
    task = "gym:examples.key_apples:KeyApples"
    # a step budget, not a few seconds: on a loaded machine 3 s once ended 7 episodes, fewer than the window
    assert main(["--tasks", task, "--methods", "rtrl", "--seeds", "0", "--minutes", "3", "--steps", "480",
                 "--jobs", "1", "--out", str(out), "--window-episodes", "20", "env.num_envs=4", "learner.batch_size=4",
                 "model.hidden_size=8", "logger.log_interval_s=0.5", "env.options.span=5",
                 "env.options.apple_rate=1.0", "env.options.apple_reward=1.0"]) == 0
    row = next(csv.DictReader(open(out / "memory_runs.csv")))
    metrics = list(csv.DictReader(open(next((out / "runs").iterdir()) / "metrics.csv")))
    ended = [r for r in metrics if r.get("episode_success", "") not in ("", "nan")]
    assert ended and all(0.0 <= float(r["episode_success"]) <= 1.0 for r in ended)
    assert np.mean([float(r["episode_return"]) for r in ended]) > np.mean([float(r["episode_success"]) for r in ended])
    assert 0.0 <= float(row["final"]) <= 1.0 and 0.0 <= float(row["fresh"]) <= 1.0


def test_a_ppo_run_logs_the_success_beside_the_return(tmp_path):
    """``algo: ppo`` logs ``episode_success`` too: a real short PPO run of key and apples whose apples pay 1 each."""
    from r2ac.config import load_config
    from r2ac.runtime.ppo import train_ppo

    cfg = load_config(None, ["algo=ppo", "env.id=gym:examples.key_apples:KeyApples", "env.num_envs=2",
                             "env.options={span: 5, apple_rate: 1.0, apple_reward: 1.0}", "ppo.rollout_length=12",
                             "ppo.epochs=1", "ppo.minibatches=2", "ppo.encoder=[8]", "model.core=rtu",
                             "model.hidden_size=4", "total_steps=96", f"run_dir={tmp_path / 'run'}",
                             "logger.tensorboard=false", "logger.progress_bar=false"])
    assert train_ppo(cfg)["status"] == "finished"
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    ended = [r for r in rows if r.get("episode_success", "") not in ("", "nan")]
    assert ended and all(0.0 <= float(r["episode_success"]) <= 1.0 for r in ended)
    assert np.mean([float(r["episode_return"]) for r in ended]) > np.mean([float(r["episode_success"]) for r in ended])
