"""`r2ac sweep`: the grid and seeds, checks before any run, runs on a real local Ray instance and one by one,
W&B groups, the results table."""

import csv
import glob
import json
import os

import pytest

from r2ac.cli import main
from r2ac.config import ConfigError, load_config
from r2ac.sweep import build_sweep, parse_grid, parse_seeds, run_problems, run_resources, task_config

TINY = ["total_steps=200", "env.num_envs=4", "env.options={corridor_length: 4}", "learner.batch_size=2",
        "model.hidden_size=8", "logger.log_interval_s=0.2", "checkpoint.interval_s=.inf"]


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ------------------------------------------------------------------ the grid


def test_seeds_and_grid_syntax():
    assert parse_seeds("0,1,2") == [0, 1, 2] and parse_seeds("3-5,1,4") == [3, 4, 5, 1]
    for bad in ("0,x", "-1", "5-2", ""):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)
    fixed, grid = parse_grid(["learner.learning_rate=[0.001, 3e-4]", "total_steps=100", "logger.wandb_tags=[a, b]",
                              "model.stem_channels=[[16, 32], [8]]", "env.options={corridor_length: 4}",
                              "logger.tensorboard=[true, false]"])
    # a list-valued key takes one list as a plain override; a list of lists sweeps it
    assert fixed == ["total_steps=100", "logger.wandb_tags=[a, b]", "env.options={corridor_length: 4}"]
    assert grid == [("learner.learning_rate", ["0.001", "3e-4"]), ("model.stem_channels", ["[16, 32]", "[8]"]),
                    ("logger.tensorboard", ["true", "false"])]
    with pytest.raises(ConfigError) as e:
        parse_grid(["model.learning=[rtrl, tbptt", "x", "seed=[1, 2]", "name=a", "lr=[]", "a=[1, 1]", "b=1", "b=2"])
    assert len(e.value.errors) == 7
    text = str(e.value)
    for part in ("not a YAML list", "'x' is neither", "use --seeds", "sets name", "no values", "listed twice",
                 "given twice"):
        assert part in text, part


def test_runs_are_the_cross_product_with_unique_names_and_dirs(tmp_path):
    sweep = build_sweep("quickstart", ["model.learning=[rtrl, tbptt]", "learner.unroll_length=[5, 10]", *TINY],
                        [0, 1], name="s", sweep_dir=str(tmp_path / "s"))
    assert len(sweep.runs) == 8 and not (tmp_path / "s").exists()  # nothing written before running
    names = [r.name for r in sweep.runs]
    dirs = [r.run_dir for r in sweep.runs]
    assert len(set(names)) == len(set(dirs)) == 8
    assert names[:2] == ["s/learning=rtrl,unroll_length=5/seed0", "s/learning=rtrl,unroll_length=5/seed1"]
    assert dirs[1] == os.path.join(str(tmp_path / "s"), "learning=rtrl,unroll_length=5_seed1")
    assert {(r.cfg.model.learning, r.cfg.learner.unroll_length, r.cfg.seed) for r in sweep.runs} == {
        (m, u, s) for m in ("rtrl", "tbptt") for u in (5, 10) for s in (0, 1)}
    assert all(r.cfg.logger.wandb_group == "s" and r.cfg.name == r.name and r.cfg.total_steps == 200
               for r in sweep.runs)
    # the same last key component twice: the full keys tell them apart
    sweep = build_sweep("quickstart", ["learner.learning_rate=[0.01]", "ppo.learning_rate=[0.02]"], name="t")
    assert sweep.runs[0].label == "learner.learning_rate=0.01,ppo.learning_rate=0.02"


def test_env_id_sweep_drops_the_previous_envs_options():
    """Overriding env.id with another kind of env drops the options written for the config's env (issue 14:
    `env.id=atari:Breakout` on quickstart failed on corridor_length)."""
    cfg = load_config("quickstart", ["env.id=atari:Breakout"])
    assert cfg.env.options == {} and run_problems(cfg) == []
    assert load_config("quickstart", ["env.id=tmaze"]).env.options == {"corridor_length": 40}  # same env: kept
    # the same for the core: options set for one core are checked against the core the run builds
    assert run_problems(load_config(None, ["model.core=rtu", "model.core_options={contractive: true}"])) == [
        "model.core_options: unknown option(s) ['contractive'] for core 'rtu'; its options: ['variant', "
        "'activation', 'r_min', 'r_max', 'max_phase'] (e.g. model.core_options={})"]
    sweep = build_sweep("quickstart", ["env.id=[tmaze, cue, atari:Breakout]"], name="e")
    assert [r.cfg.env.options for r in sweep.runs] == [{"corridor_length": 40}, {}, {}]


def test_every_problem_is_reported_before_any_run(tmp_path, capsys):
    """Grid syntax, unknown keys, bad values, unknown env ids and cores: all in one error, nothing started."""
    out = tmp_path / "s"
    code = main(["sweep", "quickstart", "--dir", str(out), "learner.foo=[1, 2]", "learner.batch_size=[0, 2]",
                 "env.id=[tmaze, nope]", "model.learning=[rtrl, tbptt", "model.core=nope", "seed=3"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists() and "Traceback" not in err
    assert err.startswith("r2ac sweep: error: invalid config in the sweep of quickstart (6 problems):")
    for part in ("the sweep sets seed", "unknown key 'learner.foo'", "learner.batch_size: must be > 0, got 0",
                 "id=nope: env.id: unknown env id 'nope'", "not a YAML list", "unknown core 'nope'"):
        assert err.count(part) == 1, part  # once, not once per grid point or seed
    # a problem of one combination only names its grid point
    with pytest.raises(ConfigError) as e:
        build_sweep("quickstart", ["algo=[impala, a2c]", "learner.batch_size=[2, 4]", "env.num_envs=4",
                                   "env.id=[tmaze, cue]"])
    assert [m.split(" (")[0] for m in e.value.errors] == [
        "algo=a2c,batch_size=2,id=tmaze; algo=a2c,batch_size=2,id=cue: algo=a2c needs learner.batch_size=4"]
    # ... and one of every combination with a grid value names that value
    with pytest.raises(ConfigError, match=r"in the sweep of quickstart: id=tmaze: env.options: unknown option"):
        build_sweep("quickstart", ["env.id=[tmaze, copy]", "env.options.span=[5, 6]"])
    assert main(["sweep", "quickstart", "--seeds", "1-0"]) == 2
    assert "--seeds '1-0'" in capsys.readouterr().err


def test_resources_per_run():
    local = load_config("quickstart", ["runtime.torch_threads=2"])
    assert run_resources(local, 8) == {"cpus": 2.0, "num_cpus": 2.0, "num_gpus": 0.0}
    assert run_resources(load_config("quickstart", ["runtime.torch_threads=0"]), 4)["num_cpus"] == 4.0
    assert run_resources(load_config("quickstart", ["device=cuda"]), 4)["num_gpus"] == 1.0
    ray_run = load_config("quickstart", ["runtime.kind=ray", "runtime.num_actors=3"])
    # its learner and actors are Ray actors of their own: the task holds no CPU, the sweep counts 4 slots
    assert run_resources(ray_run, 8) == {"cpus": 4.0, "num_cpus": 0.0, "num_gpus": 0.0}


def test_device_auto_in_a_ray_task_that_reserved_no_gpu_is_the_cpu():
    """Ray shows every GPU to a task that reserved none: device=auto there would stack every run on the first
    GPU. A local-runtime run without a reserved GPU trains on the CPU; device=cuda reserves one; a Ray-runtime
    run keeps auto (its learner process decides from the GPUs Ray gave it)."""
    for overrides, device in (([], "cpu"), (["device=cpu"], "cpu"), (["device=cuda"], "cuda"),
                              (["runtime.kind=ray"], "auto")):
        cfg = load_config("quickstart", overrides)
        assert task_config(cfg, run_resources(cfg, 4)).device == device, overrides
    cfg = load_config("quickstart")
    assert task_config(cfg, run_resources(cfg, 4)).model == cfg.model  # nothing else changes


# ------------------------------------------------------------------ running


def test_sweep_on_a_local_ray_instance(tmp_path, capsys):
    """Seeds x values as Ray tasks on a real local Ray instance: a run directory each, one results table."""
    ray = pytest.importorskip("ray")
    connected = ray.is_initialized()  # an earlier test's session-wide instance (conftest ray_local) is reused
    out = tmp_path / "s"
    code = main(["sweep", "quickstart", "--seeds", "0,1", "model.learning=[rtrl, tbptt]", *TINY, "--name", "tiny",
                 "--dir", str(out), "--num-cpus", "2"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert "4 runs (2 grid points x 2 seeds) as Ray tasks on a local Ray instance" in stdout
    assert ray.is_initialized() == connected  # an instance the sweep started itself is stopped at the end
    rows = _rows(out / "results.csv")
    assert [(r["run"], r["seed"], r["model.learning"]) for r in rows] == [
        ("learning=rtrl", "0", "rtrl"), ("learning=rtrl", "1", "rtrl"), ("learning=tbptt", "0", "tbptt"),
        ("learning=tbptt", "1", "tbptt")]
    assert all(r["status"] == "finished" and int(r["steps"]) >= 200 and float(r["wall_s"]) > 0 for r in rows)
    for r in rows:
        summary = json.load(open(os.path.join(r["run_dir"], "summary.json")))
        assert float(r["final_return"]) == pytest.approx(summary["recent_return"], rel=1e-5)
        saved = load_config(os.path.join(r["run_dir"], "config.yaml"))
        assert (saved.seed, saved.model.learning, saved.name) == (
            int(r["seed"]), r["model.learning"], f"tiny/{r['run']}/seed{r['seed']}")
        assert (out / "logs" / (os.path.basename(r["run_dir"]) + ".log")).stat().st_size > 0
    described = json.load(open(out / "sweep.json"))
    assert described["grid"] == {"model.learning": ["rtrl", "tbptt"]} and described["seeds"] == [0, 1]
    # the table printed at the end: one line per run and the mean over seeds per grid point
    assert "learning=tbptt  1     finished" in stdout and "learning=rtrl: " in stdout
    # a second sweep into the same directory is refused
    assert main(["sweep", "quickstart", *TINY, "--dir", str(out), "--local"]) == 2
    assert "exists and is not empty" in capsys.readouterr().err


def test_local_sweep_groups_wandb_runs_and_reports_failures(tmp_path, monkeypatch, capsys, wandb_env):
    """--local runs one by one in this process; with W&B each run is named sweep/value/seed in the sweep's
    group; a run that fails at its start is a row of the table (its reason in one line), the others go on."""
    from test_logger import wandb_records

    out = tmp_path / "s"
    # corridor_length=-1 passes the config checks (env options are the env's to judge) and fails at the start
    code = main(["sweep", "quickstart", "--local", "--seeds", "0,1", "env.options.corridor_length=[4, -1]", *TINY,
                 "logger.wandb=true", "logger.wandb_mode=offline", "--name", "grp", "--dir", str(out)])
    captured = capsys.readouterr()
    assert code == 1 and "2 of 4 runs did not finish" in captured.err
    assert "one after another in this process" in captured.out
    rows = _rows(out / "results.csv")
    assert [r["status"] for r in rows][:2] == ["finished", "finished"]
    failed = rows[2:]
    assert all(r["status"].startswith("failed: ") and "corridor_length" in r["status"] for r in failed)
    assert all(not os.path.exists(r["run_dir"]) for r in failed)  # no half-made run directory
    assert "Traceback" in (out / "logs" / "corridor_length=-1_seed0.log").read_text()
    groups = []
    for r in rows[:2]:
        run_id = open(os.path.join(r["run_dir"], "wandb_run_id")).read().strip()
        files = glob.glob(os.path.join(r["run_dir"], "wandb", f"offline-run-*-{run_id}", f"run-{run_id}.wandb"))
        rec = wandb_records(files[0], "run")[0].run
        groups.append((rec.run_group, rec.display_name))
    assert groups == [("grp", "grp/corridor_length=4/seed0"), ("grp", "grp/corridor_length=4/seed1")]



def test_an_interrupted_run_reports_the_steps_it_reached(tmp_path, monkeypatch):
    """Ctrl-C in a run of a sweep: the run wrote its summary on the way out; the row carries its steps."""
    import r2ac.runtime.pipeline as pipeline
    from r2ac.sweep import run_one

    cfg = load_config("quickstart", [f"run_dir={tmp_path / 'run'}"])

    def interrupted(cfg, resume=False):
        os.makedirs(cfg.run_dir)
        with open(os.path.join(cfg.run_dir, "summary.json"), "w") as f:
            json.dump({"status": "interrupted", "step": 1234, "recent_return": 0.5}, f)
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "run_training", interrupted)
    row = run_one(cfg, str(tmp_path / "logs" / "run.log"))
    assert (row["status"], row["steps"], row["final_return"]) == ("interrupted", 1234, 0.5)


def _learner_counts(run_dir):
    from r2ac.checkpoint import load_latest_checkpoint

    ck = load_latest_checkpoint(str(run_dir))
    learner = ck["extra"]["learner"]
    return ck["counters"]["step"], learner["updates"], float(learner["optimizer"]["state"][0]["step"])


def test_a_sweep_on_ray_stopped_by_sigterm_checkpoints_its_runs_and_resumes(tmp_path, capsys):
    """SIGTERM to `r2ac sweep` on a real local Ray instance (`ray job stop`, `kill`, a scheduler's limit), one
    started with SIGINT ignored: each run stops after its update with a checkpoint and summary, the table marks
    it interrupted, the command exits 130 and names --resume. `--resume` continues both runs from their
    checkpoints (counters and optimizer steps continued) to a longer total_steps; a second resume keeps the
    finished runs; one with a longer total_steps extends them in this process (--local)."""
    import signal
    import subprocess
    import sys

    from procs import metric_rows, sigterm_when

    pytest.importorskip("ray")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "s"
    runs = [out / "seed0", out / "seed1"]
    args = ["total_steps=100000000", "env.num_envs=4", "env.options={corridor_length: 4}", "learner.batch_size=2",
            "model.hidden_size=8", "logger.log_interval_s=0.1", "checkpoint.interval_s=100000",
            "logger.progress_bar=false", "logger.tensorboard=false"]
    # started with SIGINT ignored, as a script's background job (`nohup r2ac sweep ... &`) is: Ray's workers
    # inherit that, and Ray cancels a task with an interrupt that an ignored SIGINT would drop
    proc = subprocess.Popen([sys.executable, "-m", "r2ac.cli", "sweep", "quickstart", "--seeds", "0,1", *args,
                             "--name", "term", "--dir", str(out), "--num-cpus", "2"], cwd=root,
                            env=dict(os.environ, PYTHONPATH=root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))

    def no_checkpoint_yet():  # the stop itself must write them
        assert not any(os.path.isdir(r / "checkpoints") and os.listdir(r / "checkpoints") for r in runs)

    text = sigterm_when(proc, lambda: all(metric_rows(r) >= 3 for r in runs), what="both runs training",
                        timeout_s=180, before=no_checkpoint_yet)
    assert proc.returncode == 130, text[-3000:]
    assert f"r2ac sweep --resume {out}" in text, text[-3000:]
    rows = _rows(out / "results.csv")
    assert [(r["seed"], r["status"]) for r in rows] == [("0", "interrupted"), ("1", "interrupted")], rows
    before = {}
    for r, d in zip(rows, runs):
        summary = json.loads((d / "summary.json").read_text())
        step, updates, opt = _learner_counts(d)
        assert summary["status"] == "interrupted" and int(r["steps"]) == summary["step"] == step > 0
        before[d] = (step, updates, opt)
    assert sorted(os.listdir(out / "configs")) == ["seed0.yaml", "seed1.yaml"]

    target = max(s for s, _, _ in before.values()) + 300
    assert main(["sweep", "--resume", str(out), f"total_steps={target}", "--num-cpus", "2"]) == 0
    stdout = capsys.readouterr().out
    assert "0 of 2 runs finished before: kept; 2 resume from their checkpoints, 0 start" in stdout, stdout
    assert stdout.count("[sweep term] resumed seed") == 2
    rows = _rows(out / "results.csv")
    assert all(r["status"] == "finished" and int(r["steps"]) >= target for r in rows), rows
    for d in runs:
        step, updates, opt = _learner_counts(d)
        step0, updates0, opt0 = before[d]
        assert step >= target and updates > updates0 and opt == opt0 + updates - updates0
        assert load_config(str(d / "config.yaml")).total_steps == target

    assert main(["sweep", "--resume", str(out), "--local", f"total_steps={target}"]) == 0  # nothing left to run
    stdout = capsys.readouterr().out
    assert "2 of 2 runs finished before: kept; 0 resume" in stdout and "resumed seed" not in stdout
    assert [r["status"] for r in _rows(out / "results.csv")] == ["finished", "finished"]
    assert main(["sweep", "--resume", str(out), "--local", f"total_steps={target + 300}"]) == 0  # longer: extended
    assert all(int(r["steps"]) >= target + 300 for r in _rows(out / "results.csv"))


def test_resume_refuses_a_directory_without_a_sweep_and_changes_to_its_runs(tmp_path, capsys):
    """--resume names what is wrong: not a sweep directory, a config or --seeds given, a run's seed or dir."""
    assert main(["sweep", "--resume", str(tmp_path)]) == 2
    assert "no sweep.json there" in capsys.readouterr().err
    out = tmp_path / "s"
    assert main(["sweep", "quickstart", "--local", *TINY, "--dir", str(out)]) == 0
    capsys.readouterr()
    for bad, says in ((["quickstart"], "quickstart cannot be given on resume"),
                      (["--seeds", "3"], "--seeds cannot be given on resume")):
        with pytest.raises(SystemExit) as e:
            main(["sweep", "--resume", str(out), *bad])
        assert says in str(e.value)
    assert main(["sweep", "--resume", str(out), "seed=3"]) == 2
    assert "seed=3: a run's seed is fixed by the sweep" in capsys.readouterr().err
    assert main(["sweep", "--resume", str(out), "--local"]) == 0  # the finished run is kept
    assert "1 of 1 runs finished before: kept" in capsys.readouterr().out


def test_resume_of_a_sweep_saved_without_configs_builds_its_unstarted_runs_again(tmp_path, capsys):
    """A sweep directory from before configs/ (or with it lost): a started run resumes from its own
    config.yaml, a run never started is built again from sweep.json as the sweep built it."""
    import shutil

    out = tmp_path / "s"
    assert main(["sweep", "quickstart", "--local", "--seeds", "0,1", *TINY, "--name", "old", "--dir", str(out)]) == 0
    before = load_config(str(out / "seed1" / "config.yaml"))
    shutil.rmtree(out / "configs")
    shutil.rmtree(out / "seed1")  # as if seed 1 had never started
    capsys.readouterr()
    assert main(["sweep", "--resume", str(out), "--local"]) == 0
    assert "1 of 2 runs finished before: kept; 0 resume from their checkpoints, 1 start" in capsys.readouterr().out
    again = load_config(str(out / "seed1" / "config.yaml"))
    assert again == before
    assert [r["status"] for r in _rows(out / "results.csv")] == ["finished", "finished"]
