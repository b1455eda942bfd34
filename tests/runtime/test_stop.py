"""The ``stop`` section: a run ends once its mean success over the last episodes reaches ``stop.success``
(after ``stop.hold_steps`` more agent steps), with status ``stopped: solved``; ``r2ac bench memory
--stop-after-solved`` sets it for every run of a bench."""

import csv
import json

import pytest

from r2ac.bench.memory import main as bench_main
from r2ac.bench.memory import matrix, matrix_markdown
from r2ac.cli import main
from r2ac.runtime.session import RecentEpisodes, SuccessStop

TINY_IMPALA = ["configs/quickstart.yaml", "runtime.kind=local", "env.num_envs=4", "env.options={corridor_length: 4}",
               "learner.unroll_length=5", "learner.batch_size=8", "model.hidden_size=8", "model.stem_fc=8",
               "logger.tensorboard=false", "logger.progress_bar=false", "checkpoint.interval_s=100000",
               "total_steps=1000000000"]


def test_the_stop_waits_for_a_full_window_and_remembers_the_first_step_it_was_reached():
    stop = SuccessStop(threshold=0.5, window=4, hold_steps=100)
    stop.extend([1.0, 1.0, 1.0])
    assert stop.mean() is None and not stop.due(10)  # three episodes of four
    stop.extend([0.0])
    assert stop.mean() == 0.75 and not stop.due(20)  # reached at step 20: 100 more steps to go
    assert stop.reached_step == 20 and stop.reached_mean == 0.75
    stop.extend([0.0, 0.0, 0.0])  # a fall after it was reached does not move the step it was reached at
    assert not stop.due(119) and stop.due(120) and stop.reached_step == 20


def test_the_stop_reads_the_reported_successes_before_the_returns_and_zero_never_stops():
    stop = SuccessStop(threshold=0.9, window=2)
    stop.extend([5.0, 5.0], successes=[0.0, 1.0])  # returns far above the threshold, successes at 0.5
    assert stop.mean() == 0.5 and not stop.due(1)
    stop.extend([5.0], successes=[1.0])
    assert stop.due(2)
    never = SuccessStop(threshold=0.0, window=1)
    never.extend([1.0], successes=[1.0])
    assert not never.due(10 ** 9)


def test_the_episodes_of_a_run_reach_its_stop():
    stop = SuccessStop(threshold=1.0, window=2)
    episodes = RecentEpisodes(stop=stop)
    episodes.extend([(1.0, 5), (0.0, 5)], successes=[1.0])  # one of the two reported a success
    episodes.extend([(1.0, 5)], successes=[1.0])
    assert list(stop.returns) == [0.0, 1.0] and list(stop.successes) == [1.0, 1.0] and stop.due(0)
    assert episodes.pop_metrics()["episodes"] == 3


@pytest.mark.parametrize("hold", [0, 2000])
def test_a_run_ends_when_solved_and_trains_on_for_the_hold(tmp_path, capsys, hold):
    run_dir = tmp_path / "run"
    # random play wins the 4-step T-maze about half the time: 0.3 over 20 episodes comes within a few updates
    assert main(["train", *TINY_IMPALA, f"run_dir={run_dir}", "stop.success=0.3", "stop.window_episodes=20",
                 f"stop.hold_steps={hold}", "--minutes", "2"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "stopped: solved"
    reached = summary["stop_reached"]
    assert reached["mean"] >= 0.3 and reached["step"] > 0
    assert reached["step"] + hold <= summary["step"] < reached["step"] + hold + 1000
    assert "stop.success 0.3 reached" in (run_dir / "events.log").read_text()
    assert f"solved: stop.success 0.3 reached at step {reached['step']}" in capsys.readouterr().err
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    assert int(float(rows[-1]["step"])) == summary["step"]  # the last row is logged at the stop


def test_without_a_stop_the_run_goes_to_its_time_limit(tmp_path):
    run_dir = tmp_path / "run"
    assert main(["train", *TINY_IMPALA, f"run_dir={run_dir}", "--minutes", "0.02"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "stopped: time limit" and "stop_reached" not in summary


def test_ppo_stops_when_solved(tmp_path):
    assert main(["train", "configs/ppo/base.yaml", f"run_dir={tmp_path}", "env.id=tmaze", "env.num_envs=2",
                 "env.options={corridor_length: 4}", "ppo.rollout_length=16", "ppo.minibatches=2", "ppo.epochs=1",
                 "total_steps=1000000000", "model.hidden_size=4", "logger.tensorboard=false",
                 "logger.progress_bar=false", "stop.success=0.3", "stop.window_episodes=20", "--minutes", "2"]) == 0
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["status"] == "stopped: solved" and summary["step"] < 1000000000


BENCH = ["--tasks", "cue-vector", "--spans", "3", "--methods", "rtrl", "--seeds", "0", "--jobs", "1"]
TINY_BENCH = ["env.num_envs=8", "learner.batch_size=8", "model.hidden_size=8", "logger.log_interval_s=0.2"]


def test_bench_stop_after_solved_ends_each_run_and_is_not_a_setting_of_its_own(tmp_path):
    out = tmp_path / "bm"
    # chance is 1/3 on the three cues: 0.2 over 20 episodes is reached at once
    assert bench_main([*BENCH, "--threshold", "0.2", "--window-episodes", "20", "--stop-after-solved", "200",
                       "--minutes", "2", "--out", str(out), *TINY_BENCH]) == 0
    rows = list(csv.DictReader(open(out / "memory_runs.csv")))
    assert [r["status"] for r in rows] == ["stopped: solved"]
    run_dir = out / "runs" / "cue-vector-3-rtrl-s0"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["step"] >= summary["stop_reached"]["step"] + 200
    saved = (run_dir / "config.yaml").read_text()
    assert "success: 0.2" in saved and "hold_steps: 200" in saved and "window_episodes: 20" in saved
    # the stop is bookkeeping: the run counts as one of the settings under test, with no (*) on its cell
    table = matrix_markdown(matrix([str(out)], "configs/quickstart.yaml", TINY_BENCH, 0.2, 20))
    assert "(*)" not in table and "1/1" in table


def test_bench_stop_after_solved_needs_an_episode_window(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench_main([*BENCH, "--window-episodes", "0", "--stop-after-solved", "100", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert "--stop-after-solved" in err and "--window-episodes > 0" in err
