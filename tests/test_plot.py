"""`r2ac plot`: runs grouped over seeds (by config or by a sweep's grid point), curves against env frames with
bootstrap bands, rliable's IQM and CIs of final scores, a PNG and a CSV; a one-row run shows its point."""

import csv
import json
import os

import numpy as np
import pytest
from scipy.stats import trim_mean

from r2ac.cli import main
from r2ac.config import load_config, save_config
from r2ac.logger import RunLogger
from r2ac.plotting import curve_band, final_aggregates, plot_runs

NO_BACKENDS = {"tensorboard": False, "wandb": False}


def make_run(run_dir, overrides, ys, steps=None):
    """A run directory as training leaves it: config.yaml and metrics.csv (``ys`` at ``steps``)."""
    os.makedirs(run_dir, exist_ok=True)
    save_config(load_config("quickstart", [f"run_dir={run_dir}", *overrides]), os.path.join(run_dir, "config.yaml"))
    steps = steps if steps is not None else [100 * (i + 1) for i in range(len(ys))]
    with RunLogger(run_dir, NO_BACKENDS, {}, "r") as lg:
        for s, y in zip(steps, ys):
            lg.log(s, {"episode_return": y, "total_loss": 1.0})
    return str(run_dir)


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_seeds_form_one_curve_per_config_with_rliable_aggregates(tmp_path):
    rng = np.random.default_rng(0)
    finals = {"rtrl": [0.9, 0.7, 0.95, 0.8, 0.2, 0.85, 0.75, 0.99], "tbptt": [0.3, 0.4, 0.35]}
    dirs = []
    for learning, ends in finals.items():
        for seed, end in enumerate(ends):
            ys = list(np.linspace(0, end, 20) + rng.normal(0, 0.01, 20))
            ys[-2:] = [end, end]  # the last 10 % of the x range: rows 19 and 20
            dirs.append(make_run(tmp_path / f"{learning}_{seed}", [f"model.learning={learning}", f"seed={seed}",
                                                                  "env.id=atari:Breakout"], ys))
    res = plot_runs(dirs, smooth=0.0, reps=500)
    assert res["png"] == str(tmp_path / "plot.png") and os.path.getsize(res["png"]) > 5000
    aggs = {a["group"]: a for a in res["aggregates"]}
    assert set(aggs) == {"model.learning=rtrl", "model.learning=tbptt"}  # seeds grouped, named by what differs
    a = aggs["model.learning=rtrl"]
    assert a["runs"] == 8 and a["scores"] == pytest.approx(finals["rtrl"], abs=1e-6)
    # IQM: the middle half of the 8 final scores (the 0.2 outlier and the best are trimmed), unlike the mean
    assert a["iqm"] == pytest.approx(trim_mean(finals["rtrl"], 0.25)) and a["mean"] == pytest.approx(
        np.mean(finals["rtrl"]))
    assert a["iqm_low"] < a["iqm"] < a["iqm_high"] and a["mean_low"] < a["mean"] < a["mean_high"]
    assert a["final_x"] == 2000 * 4  # env frames: Atari repeats each action 4 frames
    assert res["xlabel"] == "env frames" and res["ylabel"] == "episode return"
    assert res["title"] == "atari:Breakout: 2 configurations"
    rows = _csv(res["csv"])
    assert res["csv"] == str(tmp_path / "plot_aggregates.csv") and len(rows) == 2
    assert float(rows[0]["iqm"]) == pytest.approx(a["iqm"], rel=1e-5) and json.loads(rows[0]["scores"])
    assert "IQM" in res["table"] and "model.learning=tbptt  3" in res["table"]
    # the same bootstrap seed gives the same intervals
    again = plot_runs(dirs, smooth=0.0, reps=500, out=str(tmp_path / "again.png"))
    assert again["aggregates"][0]["iqm_low"] == a["iqm_low"]


def test_curve_band_is_the_bootstrap_ci_of_the_iqm():
    same = np.tile(np.linspace(0, 1, 10), (4, 1))
    mid, lo, hi = curve_band(same, reps=200, seed=0)
    assert np.allclose(mid, same[0]) and np.allclose(lo, same[0]) and np.allclose(hi, same[0])
    spread = same + np.array([[-0.2], [-0.1], [0.1], [0.2]])
    mid, lo, hi = curve_band(spread, reps=500, seed=0)
    assert np.allclose(mid, same[0]) and np.all(lo < mid) and np.all(hi > mid) and np.all(hi - lo <= 0.4 + 1e-9)
    one = final_aggregates([0.5], reps=50, seed=0)  # one run: a point, no spread
    assert one["iqm"] == one["iqm_low"] == one["iqm_high"] == 0.5


def test_a_sweep_directory_is_grouped_by_grid_point(tmp_path, capsys):
    sweep = tmp_path / "sw"
    runs = []
    for label, base in (("lr=0.1", 1.0), ("lr=0.01", 2.0)):
        for seed in (0, 1):
            leaf = f"{label}_seed{seed}"
            make_run(sweep / leaf, [f"seed={seed}", f"name=sw/{label}/seed{seed}"], [base, base + seed, base + 1])
            runs.append({"label": label, "point": {"learner.learning_rate": label[3:]}, "seed": seed,
                         "name": f"sw/{label}/seed{seed}", "run_dir": leaf})
    runs.append({"label": "lr=1", "point": {}, "seed": 0, "name": "x", "run_dir": "failed_at_start"})  # no dir
    (sweep / "sweep.json").write_text(json.dumps({"name": "sw", "runs": runs}))
    assert main(["plot", str(sweep), "--x", "step", "--smooth", "0"]) == 0
    out = capsys.readouterr().out
    assert f"plot: {sweep / 'plot.png'}" in out and "lr=0.01  2" in out
    rows = _csv(sweep / "plot_aggregates.csv")
    assert [(r["group"], r["runs"]) for r in rows] == [("lr=0.1", "2"), ("lr=0.01", "2")]
    assert float(rows[1]["mean"]) == pytest.approx(3.0)  # the last row of each run (10 % of the x range)
    # a directory holding runs and the sweep's runs named one by one give the same groups
    res = plot_runs([str(sweep / "lr=0.1_seed0"), str(sweep / "lr=0.1_seed1")], x="step", smooth=0,
                    out=str(tmp_path / "two.png"))
    assert [(a["group"], a["runs"]) for a in res["aggregates"]] == [("sw/lr=0.1", 2)]  # its name, less the seed
    assert res["title"] == "sw/lr=0.1: tmaze, elstm/rtrl, M=10"


def test_one_row_run_plots_a_visible_point(tmp_path):
    import matplotlib.image

    run = make_run(tmp_path / "one", [], [0.5], steps=[100])
    res = plot_runs([run], reps=50)
    img = matplotlib.image.imread(res["png"])[..., :3]
    left = img[:, : img.shape[1] // 2]  # the curves panel
    blue = (left[..., 2] > 0.5) & (left[..., 0] < 0.3) & (left[..., 1] < 0.6)  # matplotlib's C0 (#1f77b4)
    assert blue.sum() > 20  # the marker (a one-point line alone draws nothing)
    assert res["aggregates"][0]["scores"] == [0.5]


def test_final_scores_from_evaluations_and_one_line_errors(tmp_path, capsys):
    from r2ac.evaluation import append_eval_csv

    run = make_run(tmp_path / "r", [], [0.1, 0.2, 0.3])
    assert main(["plot", run, "--final", "eval"]) == 2
    assert "has no eval.csv" in capsys.readouterr().err
    for step, mean in ((100, 0.4), (300, 0.8)):
        append_eval_csv(run, {"step": step, "env_frames": step, "mode": "greedy", "seed": 1, "sets": 1,
                              "episodes": 2, "mean": mean, "std": 0.0, "min": mean, "max": mean, "mean_length": 5,
                              "set_means": [mean]})
    assert plot_runs([run], final="eval", reps=50)["aggregates"][0]["scores"] == [0.8]
    for argv, part in ((["plot", run, "--y", "reward"], "no column 'reward'"),
                       (["plot", str(tmp_path / "nope")], "no such run or sweep directory"),
                       (["plot", str(tmp_path / "empty")], "no runs"),
                       (["plot", run, "--smooth", "1"], "--smooth must be in [0, 1)")):
        os.makedirs(tmp_path / "empty", exist_ok=True)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert part in err and err.count("\n") == 1 and "Traceback" not in err, err
