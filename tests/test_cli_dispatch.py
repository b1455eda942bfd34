"""The CLI dispatches on algo and refuses combinations that cannot work, with clear errors."""

import json

from r2ac.cli import main

TINY_PPO = ["env.id=tmaze", "env.num_envs=2", "ppo.rollout_length=16", "ppo.minibatches=2", "ppo.epochs=1",
            "total_steps=64", "model.hidden_size=4", "logger.tensorboard=false", "logger.progress_bar=false"]


def test_train_dispatches_ppo(tmp_path, capsys):
    assert main(["train", "configs/ppo/base.yaml", f"run_dir={tmp_path}", *TINY_PPO]) == 0
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["step"] >= 64
    capsys.readouterr()
    assert main(["eval", str(tmp_path), "--sets", "1", "--episodes", "4"]) == 0  # PPO runs evaluate too (PPOPolicy)
    assert json.load(open(tmp_path / "eval.json"))["step"] == summary["step"]
    assert main(["train", "configs/ppo/base.yaml", f"run_dir={tmp_path / 'ray'}", *TINY_PPO,
                 "runtime.kind=ray"]) == 2
    assert "runtime.kind=local" in capsys.readouterr().err


def test_impala_refuses_continuous_actions(tmp_path, capsys):
    code = main(["train", "configs/quickstart.yaml", f"run_dir={tmp_path}", "env.id=gymc:Pendulum-v1",
                 "env.options=null", "model.stem=mlp", "total_steps=100", "logger.progress_bar=false"])
    assert code == 2
    assert "continuous actions" in capsys.readouterr().err


def test_bad_env_option_is_a_clear_error(tmp_path, capsys):
    assert main(["train", "configs/quickstart.yaml", f"run_dir={tmp_path}", "env.options={corridor: 3}"]) == 2
    err = capsys.readouterr().err
    assert "corridor" in err and "corridor_length" in err and "Traceback" not in err


# ------------------------------------------------------------------ discovery and user errors


def test_version_and_list(capsys):
    import pytest

    import r2ac

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"r2ac {r2ac.__version__}"
    assert main(["list", "cores"]) == 0
    out = capsys.readouterr().out
    assert "elstm" in out and "rtrl (exact)" in out and "gru" in out
    assert main(["list", "envs"]) == 0
    out = capsys.readouterr().out
    assert "atari:<Game>" in out and "corridor_length=10" in out and "popgym:<Name>" in out
    assert main(["list", "configs"]) == 0
    out = capsys.readouterr().out
    assert "quickstart " in out and "atari/breakout_rtrl_m50" in out and "atari/base" not in out


def test_bench_help_lists_benchmarks(capsys):
    assert main(["bench", "-h"]) == 0
    out = capsys.readouterr().out
    assert "core" in out and "vecenv" in out and "memory" in out


def test_shipped_configs_work_from_any_directory(tmp_path, monkeypatch):
    """`r2ac train quickstart` outside the repository: the configs are package data."""
    from r2ac.config import PACKAGED_CONFIGS, load_config, resolve_config_path

    monkeypatch.chdir(tmp_path)
    assert load_config("quickstart").name == "quickstart"
    assert load_config("configs/memory/tmaze.yaml").env.id == "tmaze"
    assert load_config("atari/breakout_rtrl_m50.yaml").env.id == "atari:Breakout"  # inherits base.yaml
    assert resolve_config_path("quickstart").startswith(PACKAGED_CONFIGS)
    (tmp_path / "quickstart").write_text("name: mine\n")  # a file of that name wins
    assert load_config("quickstart").name == "mine"


def test_failed_start_leaves_no_run_directory(tmp_path, capsys):
    for i, override in enumerate(["env.id=atari:NoSuchGameAtAll", "env.options={corridor: 3}", "env.id=nosuch"]):
        run = tmp_path / f"run{i}"
        assert main(["train", "quickstart", f"run_dir={run}", override, "logger.progress_bar=false"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and not run.exists(), (override, err)
    # an existing directory is never removed
    keep = tmp_path / "existing"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    assert main(["train", "quickstart", f"run_dir={keep}", "env.id=nosuch"]) == 2
    assert (keep / "notes.txt").exists()


def test_run_outputs_are_group_readable(tmp_path):
    import stat

    run = tmp_path / "run"
    assert main(["train", "quickstart", f"run_dir={run}", "total_steps=80", "env.num_envs=4",
                 "learner.batch_size=2", "model.hidden_size=4", "logger.progress_bar=false"]) == 0
    modes = {p.relative_to(run): stat.S_IMODE(p.stat().st_mode) for p in [run, *run.rglob("*")]}
    assert modes and all(m & 0o044 == 0o044 for m in modes.values()), modes  # group and others can read
    assert all(m & 0o055 == 0o055 for p, m in modes.items() if (run / p).is_dir()), modes


def test_pretrain_honours_pipeline_budget(tmp_path):
    run = tmp_path / "pre"
    assert main(["pretrain", "configs/memory/tmaze_pipeline.yaml", f"run_dir={run}", "total_steps=100000",
                 "pipeline.pretrain_steps=160", "pipeline.pretrain_unroll_length=5", "env.num_envs=4",
                 "learner.batch_size=2", "model.hidden_size=4", "logger.progress_bar=false",
                 "logger.tensorboard=false"]) == 0
    from r2ac.config import load_config

    cfg = load_config(str(run / "config.yaml"))
    assert (cfg.total_steps, cfg.learner.unroll_length, cfg.model.learning) == (160, 5, "tbptt")
    assert json.load(open(run / "summary.json"))["step"] < 1000 and (run / "stem.safetensors").exists()


def test_bench_vecenv_compares_the_vector_envs(tmp_path, capsys):
    import csv

    out = tmp_path / "vecenv.csv"
    assert main(["bench", "vecenv", "--envs", "CartPole-v1", "--num-envs", "2", "--seconds", "0.05",
                 "--repeats", "1", "--csv", str(out)]) == 0
    rows = list(csv.DictReader(open(out)))
    assert [r["vector"] for r in rows] == ["r2ac", "gymnasium-sync", "gymnasium-async"]
    assert all(float(r["steps_per_s"]) > 0 for r in rows) and float(rows[0]["vs_r2ac"]) == 1.0
    assert "gymnasium-async" in capsys.readouterr().out


# ------------------------------------------------------------------ a wall-clock budget


TINY_IMPALA = ["configs/quickstart.yaml", "runtime.kind=local", "env.num_envs=4", "env.options={corridor_length: 4}",
               "learner.unroll_length=5", "learner.batch_size=8", "model.hidden_size=8", "model.stem_fc=8",
               "logger.tensorboard=false", "logger.progress_bar=false", "checkpoint.interval_s=100000"]


def test_minutes_stops_the_run_with_a_checkpoint_and_resume_goes_on(tmp_path, capsys):
    from r2ac.checkpoint import load_latest_checkpoint

    run_dir = tmp_path / "run"
    assert main(["train", *TINY_IMPALA, "total_steps=1000000000", f"run_dir={run_dir}", "--minutes", "0.02"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "stopped: time limit"
    assert 0 < summary["step"] < 1000000000
    err = capsys.readouterr().err
    assert "--minutes 0.02" in err and f"r2ac train --resume {run_dir}" in err
    first = load_latest_checkpoint(str(run_dir))
    assert first["counters"]["step"] == summary["step"]

    # 0.02 more minutes: counters and the optimizer's state go on from the checkpoint
    assert main(["train", "--resume", str(run_dir), "--minutes", "0.02"]) == 0
    again = json.loads((run_dir / "summary.json").read_text())
    assert again["status"] == "stopped: time limit" and again["step"] > summary["step"]
    new = load_latest_checkpoint(str(run_dir))
    u0, u1 = first["extra"]["learner"]["updates"], new["extra"]["learner"]["updates"]
    opt0 = float(first["extra"]["learner"]["optimizer"]["state"][0]["step"])
    opt1 = float(new["extra"]["learner"]["optimizer"]["state"][0]["step"])
    assert u1 > u0 and opt1 == opt0 + u1 - u0
    assert "stopped at the time limit (--minutes 0.02)" in capsys.readouterr().err

    # the step budget still ends a run that has minutes left (an override after the options counts too)
    assert main(["train", "--resume", str(run_dir), "--minutes", "5", f"total_steps={again['step'] + 40}"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    assert "time limit" not in capsys.readouterr().err


def test_minutes_with_ppo(tmp_path):
    args = [a for a in TINY_PPO if not a.startswith("total_steps=")]
    assert main(["train", "configs/ppo/base.yaml", f"run_dir={tmp_path}", *args, "total_steps=1000000000",
                 "--minutes", "0.01"]) == 0
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["status"] == "stopped: time limit" and 0 < summary["step"] < 1000000000


def test_minutes_must_be_a_positive_number(tmp_path, capsys):
    import pytest

    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(SystemExit) as e:
            main(["train", "quickstart", f"run_dir={tmp_path / 'x'}", "--minutes", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--minutes" in err and "minutes" in err.split("--minutes", 1)[1]
    assert not (tmp_path / "x").exists()
