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
    assert main(["eval", str(tmp_path)]) == 2
    assert "algo=ppo" in capsys.readouterr().err
    assert main(["train", "configs/ppo/base.yaml", f"run_dir={tmp_path / 'ray'}", *TINY_PPO,
                 "runtime.kind=ray"]) == 2
    assert "runtime.kind=local" in capsys.readouterr().err


def test_impala_refuses_continuous_actions(tmp_path, capsys):
    code = main(["train", "configs/quickstart.yaml", f"run_dir={tmp_path}", "env.id=gymc:Pendulum-v1", "env.options=null",
                 "model.stem=mlp", "total_steps=100", "logger.progress_bar=false"])
    assert code == 2
    assert "continuous actions" in capsys.readouterr().err


def test_bad_env_option_is_a_clear_error(tmp_path, capsys):
    assert main(["train", "configs/quickstart.yaml", f"run_dir={tmp_path}", "env.options={corridor: 3}"]) == 2
    err = capsys.readouterr().err
    assert "corridor" in err and "corridor_length" in err and "Traceback" not in err
