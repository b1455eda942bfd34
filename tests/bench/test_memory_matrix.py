"""``r2ac bench memory --matrix``: the suite table gathered from the memory_runs.csv of several benches."""

import csv
import math
import os

import pytest

from r2ac.bench.common import write_csv
from r2ac.bench.memory import RUN_COLUMNS, main, matrix, matrix_cell


def _run(task, span, method, seed, solved_s=math.nan, final=0.33, held=math.nan, wall_s=120.0, steps=1e6):
    return {"task": task, "span": span, "method": method, "seed": seed, "status": "stopped: time limit",
            "steps": steps, "wall_s": wall_s, "steps_per_s": steps / wall_s, "solved_s": solved_s,
            "solved_steps": math.nan if math.isnan(solved_s) else 1e5, "best": max(final, 0.5), "final": final,
            "held": held, "settled": math.nan}


def _bench(path, runs):
    path.mkdir()
    write_csv(str(path / "memory_runs.csv"), runs, RUN_COLUMNS)
    return str(path)


def test_matrix_gathers_benches_and_a_later_seed_replaces_an_earlier_one(tmp_path, capsys):
    first = _bench(tmp_path / "a", [
        _run("cue-pixels", 100, "rtrl", 0, solved_s=60.0, final=1.0, held=0.9049),
        _run("cue-pixels", 100, "rtrl", 1, final=0.62, wall_s=720.0),
        _run("cue-pixels", 100, "tbptt", 0, final=0.34), _run("cue-pixels", 100, "tbptt", 1, final=0.36),
        _run("watermaze", 100, "rtrl", 0, final=2.46), _run("watermaze", 100, "rtrl", 1, final=2.58)])
    longer = _bench(tmp_path / "b", [_run("cue-pixels", 100, "rtrl", 1, solved_s=1050.0, final=0.95, held=0.903,
                                          wall_s=1400.0, steps=7.7e6)])
    out = tmp_path / "out"
    assert main(["--matrix", first, longer, "--out", str(out)]) == 0

    rows = {(r["task"], r["method"]): r for r in matrix([first, longer])}
    rtrl = rows["cue-pixels", "rtrl"]
    assert (rtrl["seeds"], rtrl["solved"]) == (2, 2)  # seed 1 is the longer bench's run, which solved
    assert rtrl["max_solved_min"] == pytest.approx(17.5) and rtrl["source"] == f"{first} {longer}"
    assert matrix_cell(rtrl) == "2/2 in 0.10 M steps, 1.0-17.5 min, held 0.903 (23 min, 7.7 M steps)"
    assert matrix_cell(rows["cue-pixels", "tbptt"]) == "0/2, final 0.34-0.36 (2 min, 1.0 M steps)"
    assert matrix_cell(rows["watermaze", "rtrl"]) == "return 2.46-2.58 (2 min, 1.0 M steps)"
    # a 2.5-minute budget reads as such, and a range of negative returns does not read as a subtraction
    held_out = matrix_cell({**rows["cue-pixels", "tbptt"], "task": "popgym:AutoencodeEasy", "final_min": -0.434,
                            "final_max": -0.42, "run_min": 2.5})
    assert held_out == "0/2, final -0.43 to -0.42 (2.5 min, 1.0 M steps)"

    table = (out / "matrix.md").read_text().splitlines()
    assert table[0] == "| task | span | rtrl | tbptt |"
    assert table[3].startswith("| watermaze | 100 | return 2.46-2.58") and table[3].endswith("| not run |")
    assert len(list(csv.DictReader(open(out / "matrix.csv")))) == 3
    assert (out / "matrix.png").stat().st_size > 1000
    assert "3 cells from 2 benches" in capsys.readouterr().out


def test_matrix_names_a_directory_that_is_not_a_bench(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--matrix", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "memory_runs.csv does not exist" in err and "its --out" in err


def test_compare_sets_settings_side_by_side_in_steps(tmp_path, capsys):
    from r2ac.bench.memory import compare, compare_markdown, parse_settings

    def solved(task, span, seed, steps, held=0.95, settled=0.96):
        r = _run(task, span, "rtrl", seed, solved_s=60.0, final=1.0, held=held)
        r["solved_steps"], r["settled"] = steps, settled
        return r

    default = _bench(tmp_path / "d", [solved("cue-pixels", 100, 0, 1.2e6), _run("cue-pixels", 100, "rtrl", 1),
                                      solved("tmaze", 40, 0, 1e5), _run("watermaze", 300, "rtrl", 0, final=7.4)])
    rerun = _bench(tmp_path / "d2", [solved("cue-pixels", 100, 1, 3.0e6, held=0.897, settled=0.9319)])
    chained, fine = solved("cue-pixels", 100, 0, 0.9e6), solved("cue-pixels", 100, 1, 1.1e6)
    chained["fresh"], fine["fresh"] = 0.36, 0.97  # a bench with the fresh-env column
    other = _bench(tmp_path / "c", [chained, fine,
                                    _run("watermaze", 300, "rtrl", 0, final=30.6), solved("copy", 100, 0, 1e6)])
    settings = parse_settings([f"default={default},{rerun}", f"contractive={other}"])
    # a label that names an override keeps its "=": the directories follow the last one
    assert parse_settings([f"learner.logit_penalty=0={other}", f"default={default}"]) == {
        "learner.logit_penalty=0": [other], "default": [default]}
    rows = compare(settings)
    # only the cells both ran (not the T-maze, not copy), each setting's row in the order given
    assert [(r["task"], r["setting"]) for r in rows] == [("cue-pixels", "default"), ("cue-pixels", "contractive"),
                                                         ("watermaze", "default"), ("watermaze", "contractive")]
    assert rows[0]["solved_Msteps"] == "1.20 3.00" and rows[0]["solved"] == 2  # seed 1 from the rerun
    assert rows[0]["median_solved_Msteps"] == pytest.approx(2.1) and rows[0]["min_held"] == 0.897
    table = compare_markdown(rows).splitlines()
    assert table[2] == ("| cue-pixels | 100 | rtrl | default | 2/2 | 1.20, 3.00 | 2.10 | - | - | 0.897 | 0.931 | 1.00 "
                        "| - | 1.0 | 8.33 |")  # each run: 1 M steps in 120 s
    # the second setting against the first, seed by seed (0.9 / 1.2, 1.1 / 3.0) and median by median (1.0 / 2.1)
    assert table[3] == ("| cue-pixels | 100 | rtrl | contractive | 2/2 | 0.90, 1.10 | 1.00 | s0 0.75, s1 0.37 | 0.48 "
                        "| 0.950 | 0.960 | 1.00 | 0.36-0.97 | 1.0 | 8.33 |")
    assert rows[1]["vs_first_per_seed"] == "s0 0.75 s1 0.37" and rows[1]["vs_first_median"] == pytest.approx(1 / 2.1)
    assert table[5] == ("| watermaze | 300 | rtrl | contractive | - | - | - | - | - | - | - | 30.60 | - | 1.0 "
                        "| 8.33 |")
    assert rows[0]["steps_per_s"] == "8333 8333" and rows[0]["median_steps_per_s"] == pytest.approx(1e6 / 120)

    out = tmp_path / "out"
    assert main(["--compare", f"default={default},{rerun}", f"contractive={other}", "--out", str(out)]) == 0
    assert "2 cells" in capsys.readouterr().out and (out / "compare.png").stat().st_size > 1000
    assert not (out / "compare_curves.png").exists()  # no run's metrics are kept here: no curves to draw
    written = list(csv.DictReader(open(out / "compare.csv")))
    assert len(written) == 4 and float(written[0]["min_settled"]) == pytest.approx(0.9319)
    for bad, says in ((["nolabel"], "LABEL=DIR"), ([f"a={default}"], "two settings or more"),
                      ([f"a={default}", f"a={other}"], "given twice"),
                      ([f"a={default}", f"b={tmp_path}"], "memory_runs.csv does not exist"),
                      ([f"a={_bench(tmp_path / 't', [solved('tmaze', 40, 0, 1e5)])}", f"b={other}"],
                       "no task, span and method that two of the settings both ran (a: tmaze 40 rtrl; b: ")):
        with pytest.raises(SystemExit):
            main(["--compare", *bad, "--out", str(out)])
        assert says in capsys.readouterr().err, bad


def test_compare_draws_each_kept_runs_success_curve_against_steps(tmp_path, capsys):
    from r2ac.bench.memory import bench_run_dir, compare_curves, parse_settings

    def bench(name, seeds_returns):
        d = _bench(tmp_path / name, [_run("keydoor", 1000, "rtrl", s) for s in seeds_returns])
        for seed, returns in seeds_returns.items():
            run = bench_run_dir(d, "keydoor", 1000, "rtrl", seed)
            os.makedirs(run)
            rows = [{"wall_time": 2.0 * i, "step": 1000 * i, "episode_return": r, "episodes": 10 * i}
                    for i, r in enumerate(returns, 1)]
            write_csv(os.path.join(run, "metrics.csv"), rows, ["wall_time", "step", "episode_return", "episodes"])
        return d

    falls = bench("a", {0: [0.3, 0.95, 0.95, 0.3, 0.95], 1: [0.3, 0.4, 0.95, 0.95, 0.95]})
    holds = bench("b", {0: [0.3, 0.95, 0.95, 0.95, 0.95]})  # seed 1's run directory is not kept here
    curves = compare_curves(parse_settings([f"adam={falls}", f"target={holds}"]), window_episodes=10)
    assert list(curves) == [("keydoor", 1000, "rtrl")]
    cell = curves["keydoor", 1000, "rtrl"]
    assert len(cell["adam"]) == 2 and len(cell["target"]) == 1
    assert [v for *_, v in cell["adam"][0]] == [0.3, 0.95, 0.95, 0.3, 0.95]
    assert [st for _, st, _ in cell["adam"][0]] == [1000, 2000, 3000, 4000, 5000]
    out = tmp_path / "out"
    assert main(["--compare", f"adam={falls}", f"target={holds}", "--out", str(out),
                 "--window-episodes", "10"]) == 0
    assert "compare_curves.png" in capsys.readouterr().out
    assert (out / "compare_curves.png").stat().st_size > 1000


def test_threshold_judges_compared_and_gathered_runs_again_from_their_curves(tmp_path, capsys):
    """A bench's memory_runs.csv holds its runs judged at its own threshold; ``--threshold`` with --compare or
    --matrix judges each again from its kept metrics.csv, and says which runs it cannot (runs/ not kept)."""
    from r2ac.bench.memory import bench_run_dir, compare, parse_settings

    def bench(name, returns_per_seed, keep=True):
        d = _bench(tmp_path / name, [_run("keydoor", 1000, "rtrl", s) for s in returns_per_seed])
        for seed, returns in returns_per_seed.items():
            if keep:
                run = bench_run_dir(d, "keydoor", 1000, "rtrl", seed)
                os.makedirs(run)
                write_csv(os.path.join(run, "metrics.csv"),
                          [{"wall_time": 60.0 * i, "step": 100000 * i, "episode_return": r, "episodes": 10 * i}
                           for i, r in enumerate(returns, 1)], ["wall_time", "step", "episode_return", "episodes"])
        return d

    a = bench("a", {0: [0.3, 0.5, 0.85, 0.8, 0.88], 1: [0.3, 0.82, 0.86, 0.87, 0.95]})
    b = bench("b", {0: [0.3, 0.4, 0.5, 0.6, 0.7]})
    settings = parse_settings([f"a={a}", f"b={b}"])
    as_stored = {r["setting"]: r for r in compare(settings)}
    assert as_stored["a"]["solved"] == 0  # the benches judged at 0.9 wrote no solve (the rows above say nan)
    again = {r["setting"]: r for r in compare(settings, threshold=0.8, window_episodes=10)}
    assert (again["a"]["solved"], again["a"]["solved_Msteps"]) == (2, "0.30 0.20")
    assert again["a"]["median_solved_Msteps"] == pytest.approx(0.25)
    assert again["a"]["min_held"] == pytest.approx(0.8) and again["b"]["solved"] == 0
    assert matrix([a], threshold=0.8, window_episodes=10)[0]["max_solved_min"] == pytest.approx(2.0)  # minutes

    out = tmp_path / "out"
    assert main(["--compare", f"a={a}", f"b={b}", "--out", str(out), "--threshold", "0.8",
                 "--window-episodes", "10"]) == 0
    assert list(csv.DictReader(open(out / "compare.csv")))[0]["solved"] == "2"
    lost = bench("lost", {0: [0.3], 1: [0.9]}, keep=False)
    with pytest.raises(SystemExit):
        main(["--matrix", a, lost, "--out", str(out), "--threshold", "0.8"])
    err = capsys.readouterr().err
    assert f"{lost}: 2 run(s)" in err and "Leave out --threshold" in err and str(a) + ":" not in err
    assert main(["--matrix", a, lost, "--out", str(out)]) == 0  # without it: each run as its bench judged it


def test_plot_spans_the_longest_run_not_the_default_minutes():
    """``--report`` over runs of 25 minutes with the default ``--minutes`` (10) plotted only their first 10."""
    from r2ac.bench.memory import plot_horizon_s

    curves = {"a": [(30.0, 1e4, 0.3), (1500.0, 1e7, 0.8)], "b": [(30.0, 1e4, 0.3), (600.0, 4e6, 0.4)],
              "c": []}
    assert plot_horizon_s(curves, 10.0) == 1500.0
    assert plot_horizon_s({"a": [(30.0, 1e4, 0.3), (170.0, 1e6, 0.4)]}, 3.0) == 170.0
    assert plot_horizon_s({"c": []}, 3.0) == 180.0


def _saved_run(bench_dir, task, span, method, seed, overrides=(), drop=None, steps=None):
    """A bench run's directory with the config.yaml a bench run of these settings saves (``drop``: a
    (section, key) left out, as in a config saved before that key existed)."""
    import yaml

    from r2ac.bench.memory import bench_run_dir, run_config
    from r2ac.config import save_config

    run_dir = bench_run_dir(str(bench_dir), task, span, method, seed)
    os.makedirs(run_dir)
    save_config(run_config("configs/quickstart.yaml", task, span, method, seed, run_dir, overrides, steps),
                os.path.join(run_dir, "config.yaml"))
    if drop:
        path = os.path.join(run_dir, "config.yaml")
        d = yaml.safe_load(open(path))
        del d[drop[0]][drop[1]]
        yaml.safe_dump(d, open(path, "w"))
    return run_dir


def test_settings_differences_compare_what_a_run_trained(tmp_path):
    from r2ac.bench.memory import settings_differences

    def diff(task, overrides=(), drop=None, steps=None, method="rtrl", against=()):
        d = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        run = _saved_run(d, task, 100, method, 1, overrides, drop, steps)
        return settings_differences(run, "configs/quickstart.yaml", task, 100, method, 1, against)

    assert diff("cue-pixels") == [] and diff("cue-pixels", steps=0) == []  # the budget is not a setting
    assert diff("cue-pixels", ["logger.log_interval_s=5", "learner.lr_schedule=constant"]) == []
    assert diff("cue-pixels", ["learner.entropy_cost=0.001", "env.desync=false"]) == ["env.desync",
                                                                                     "learner.entropy_cost"]
    # running centres: off on pixels differs; on a vector task "auto" resolves to off, so false trains the same
    assert diff("cue-pixels", ["model.running_centres=false"]) == ["model.running_centres"]
    assert diff("cue-vector", ["model.running_centres=false", "model.centre_frames=false"]) == []
    assert diff("cue-pixels", ["model.input_scale=0.1", "model.episode_start_value=10"]) == []  # what auto gives
    assert diff("cue-pixels", ["model.frame_centre=mean"]) == ["model.frame_centre"]
    assert diff("cue-vector", ["model.frame_centre=mean"]) == []  # no frame to centre
    # a config saved before the logit penalty existed trained without it
    assert diff("copy", drop=("learner", "logit_penalty")) == ["learner.logit_penalty"]
    assert diff("tmaze", method="tbptt") == []
    # env options beyond the task's are the run's variant, named in its cell ("tmaze [corridor_length=40]")
    assert diff("tmaze", ["env.options.corridor_length=40"]) == [] and diff("cue-pixels", ["env.options.cues=6"]) == []
    # against the settings under test with an override
    assert diff("cue-pixels", ["learner.entropy_cost=0.001"], against=["learner.entropy_cost=0.001"]) == []
    assert settings_differences(str(tmp_path / "none"), "configs/quickstart.yaml", "tmaze", 100, "rtrl", 0) is None


def test_matrix_marks_cells_not_run_with_the_settings_under_test(tmp_path, capsys):
    today, earlier, unkept = tmp_path / "today", tmp_path / "earlier", tmp_path / "unkept"
    for seed in (0, 1):
        _saved_run(today, "cue-pixels", 100, "rtrl", seed)
        _saved_run(earlier, "cue-pixels", 100, "tbptt", seed, ["model.running_centres=false"] if seed else [])
    for d, method in ((today, "rtrl"), (earlier, "tbptt"), (unkept, "feedforward")):
        runs = [_run("cue-pixels", 100, method, s, solved_s=90.0 if method == "rtrl" else math.nan,
                     final=0.98 if method == "rtrl" else 0.34, held=0.91) for s in (0, 1)]
        if method == "feedforward":
            d.mkdir()
        write_csv(str(d / "memory_runs.csv"), runs, RUN_COLUMNS)
    out = tmp_path / "out"
    assert main(["--matrix", str(today), str(earlier), str(unkept), "--out", str(out)]) == 0
    table = (out / "matrix.md").read_text()
    row = table.splitlines()[2]
    assert row.startswith("| cue-pixels | 100 | 2/2 in 0.10 M steps, 1.5 min, held 0.910 (2 min, 1.0 M steps) |")
    assert row.endswith("| 0/2, final 0.34 (2 min, 1.0 M steps) (*) | 0/2, final 0.34 (2 min, 1.0 M steps) (?) |")
    assert f"- (*) cue-pixels 100 tbptt: differs: model.running_centres ({earlier})" in table
    assert "- (?) settings not checked, a run left no config.yaml: cue-pixels 100 feedforward" in table
    settings = {r["method"]: r["settings"] for r in csv.DictReader(open(out / "matrix.csv"))}
    assert settings == {"rtrl": "", "tbptt": "differs: model.running_centres", "feedforward": "not checked"}
    # checked against the settings under test with that override: now the tbptt cell is mixed the other way
    assert main(["--matrix", str(today), str(earlier), "--out", str(out), "model.running_centres=false"]) == 0
    settings = {r["method"]: r["settings"] for r in csv.DictReader(open(out / "matrix.csv"))}
    assert settings == {"rtrl": "differs: model.running_centres", "tbptt": "differs: model.running_centres"}
    capsys.readouterr()


def test_compare_gives_a_variant_of_env_options_cells_of_its_own(tmp_path, capsys):
    """Runs that differ only in env options (``env.options.cues=6``) are a variant, not more seeds of the task:
    read from the ``options`` column, else from each run's saved config; unknown where neither is there."""
    from r2ac.bench.memory import compare, gather_cells, parse_settings, read_runs_csv, run_variant

    def bench(name, seeds, overrides=(), keep=True, column=True, options=""):
        d = tmp_path / name
        for seed in seeds if keep else ():
            _saved_run(d, "cue-pixels", 300, "rtrl", seed, overrides)
        d.mkdir(exist_ok=True)
        runs = [_run("cue-pixels", 300, "rtrl", s, solved_s=60.0, final=1.0, held=0.95) for s in seeds]
        for r, s in zip(runs, seeds):
            r["solved_steps"], r["options"] = 1e6 * (s + 1) * (2 if overrides or options else 1), options
        write_csv(str(d / "memory_runs.csv"), runs, RUN_COLUMNS if column else RUN_COLUMNS[:-1])
        return str(d)

    plain = bench("plain", [0, 1], column=False)
    six = bench("six", [0, 1], ["env.options.cues=6", "env.options.distractors=0.25"], column=False)
    first = os.path.join("runs", "cue-pixels-300-rtrl-s0")
    assert run_variant(os.path.join(six, first), "cue-pixels", 300) == "cues=6 distractors=0.25"
    assert run_variant(os.path.join(plain, first), "cue-pixels", 300) == ""
    assert run_variant(str(tmp_path / "nowhere"), "cue-pixels", 300) is None
    cells = gather_cells([plain, six], "--compare")
    assert list(cells) == [("cue-pixels", 300, "rtrl"), ("cue-pixels [cues=6 distractors=0.25]", 300,
                                                          "rtrl")]
    assert [r["solved_steps"] for r in cells["cue-pixels", 300, "rtrl"][1]] == [1e6, 2e6]  # not replaced by six's

    # the options column, where a bench wrote it, is read without the runs' directories
    mix = bench("mix", [0], keep=False)
    written = bench("written", [0, 1], keep=False, options="cues=6 distractors=0.25")
    assert read_runs_csv(os.path.join(mix, "memory_runs.csv"))[0]["options"] == ""
    assert read_runs_csv(os.path.join(plain, "memory_runs.csv"))[0]["options"] is None
    rows = compare(parse_settings([f"elstm={plain},{six}", f"mix={mix},{written}"]))
    assert [(r["task"], r["setting"], r["solved_Msteps"]) for r in rows] == [
        ("cue-pixels", "elstm", "1.00 2.00"), ("cue-pixels", "mix", "1.00"),
        ("cue-pixels [cues=6 distractors=0.25]", "elstm", "2.00 4.00"),
        ("cue-pixels [cues=6 distractors=0.25]", "mix", "2.00 4.00")]

    # neither column nor config: said, and counted as the task's own
    lost = bench("lost", [0, 1], keep=False, column=False)
    gather_cells([lost], "--compare")
    err = capsys.readouterr().err
    assert f"--compare: {lost}: 2 run(s) with no options column and no config.yaml" in err


def test_every_bench_task_builds_its_env_with_the_episode_length_it_declares():
    """``TASKS``' episode steps (what ``tbptt-full`` unrolls) are the length of the env's episodes."""
    import numpy as np

    from r2ac.bench.memory import TASKS, task_spec
    from r2ac.envs import make_vec_env

    for task in TASKS:
        env_id, options, steps = task_spec(task, 5)
        venv = make_vec_env(env_id, 4, 0, **options)
        venv.reset()
        rng = np.random.default_rng(0)
        lengths = []
        for _ in range(3 * steps):
            low = 1 if env_id == "tmaze" else 0  # the T-maze waits at its junction for a turn (actions 1, 2)
            _, _, done, info = venv.step(rng.integers(low, venv.num_actions, 4))
            lengths += list(info["episode_length"][done])
        assert lengths and max(lengths) == steps, task
