import numpy as np
import pytest

from r2ac.evaluation import EpisodeQuota


def test_quota_is_not_biased_towards_short_episodes():
    """env 0 finishes an episode (return 0) every step, env 1 one (return 1) every 10 steps: the first 10
    episodes to finish would be almost all from env 0; the quota takes 5 from each."""
    q = EpisodeQuota(2, 10)
    t = 0
    while not q.full():
        t += 1
        q.add(np.array([True, t % 10 == 0]), np.array([0.0, 1.0]))
    assert q.returns() == [0.0, 1.0] * 5 and np.mean(q.returns()) == 0.5


def test_quota_rounds_up_and_validates():
    q = EpisodeQuota(4, 6)
    assert q.k == 2
    for _ in range(2):
        q.add(np.ones(4, bool), np.arange(4.0))
    assert q.full() and q.returns() == [0.0, 1.0, 2.0, 3.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        EpisodeQuota(0, 3)


# ------------------------------------------------------------------ evaluating trained runs (real training)

import csv  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

from r2ac.cli import main  # noqa: E402

TINY = ["env.num_envs=4", "env.options={corridor_length: 4}", "learner.batch_size=2", "model.hidden_size=8",
        "logger.progress_bar=false", "logger.log_interval_s=0.2", "checkpoint.interval_s=.inf"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny quickstart run (T-maze, eLSTM + RTRL) with a periodic evaluation, a video and the final
    evaluation of eval.sets x eval.episodes."""
    run = tmp_path_factory.mktemp("eval") / "run"
    code = main(["train", "quickstart", f"run_dir={run}", "total_steps=1200", *TINY, "eval.interval_steps=600",
                 "eval.interval_episodes=4", "eval.video=true", "eval.at_end=true", "eval.sets=2",
                 "eval.episodes=3"])
    assert code == 0
    return run


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_training_evaluates_periodically_and_at_the_end(trained):
    rows = _rows(trained / "eval.csv")
    # two periodic evaluations (steps 600 and 1200) of 4 episodes, then the final one of 2 x 3
    assert [int(r["episodes"]) * int(r["sets"]) for r in rows] == [4, 4, 6]
    assert [int(r["step"]) for r in rows][:2] == sorted(int(r["step"]) for r in rows[:2])
    assert int(rows[0]["step"]) >= 600 and all(r["mode"] == "sampled" for r in rows)
    summary = json.load(open(trained / "summary.json"))
    assert summary["eval"]["sets"] == 2 and summary["eval"]["mean"] == pytest.approx(float(rows[-1]["mean"]))
    gifs = sorted((trained / "videos").glob("eval_step*_sampled.gif"))
    assert gifs and gifs[0].stat().st_size > 100
    from PIL import Image

    with Image.open(gifs[0]) as im:
        assert im.n_frames >= 5 and im.size[0] >= 64  # one T-maze episode (>= corridor + 1 steps), scaled up
    # eval/ metrics on TensorBoard next to the training scalars
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(trained / "tensorboard"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "eval/return_mean" in tags and "train/episode_return" in tags and "system/env_frames" in tags
    assert len(acc.Scalars("eval/return_mean")) == 3


def test_eval_cli_appends_rows_with_options(trained, capsys):
    before = len(_rows(trained / "eval.csv"))
    assert main(["eval", str(trained), "--greedy", "--episodes", "4", "--sets", "1", "--seed", "7",
                 "env.num_envs=2"]) == 0
    assert "greedy actions, seed 7" in capsys.readouterr().out
    ckpts = sorted(int(p.name[5:-3]) for p in (trained / "checkpoints").glob("ckpt_*.pt"))
    assert main(["eval", str(trained), "--checkpoint", str(ckpts[0]), "--episodes", "2", "--sets", "2"]) == 0
    rows = _rows(trained / "eval.csv")
    assert len(rows) == before + 2  # appended, never overwritten
    assert (rows[-2]["mode"], rows[-2]["seed"], rows[-2]["episodes"]) == ("greedy", "7", "4")
    assert int(rows[-1]["step"]) == ckpts[0] and rows[-1]["sets"] == "2"
    # greedy evaluation is deterministic given the seed
    assert main(["eval", str(trained), "--greedy", "--episodes", "4", "--sets", "1", "--seed", "7",
                 "env.num_envs=2"]) == 0
    assert _rows(trained / "eval.csv")[-1]["mean"] == rows[-2]["mean"]
    capsys.readouterr()
    assert main(["eval", str(trained), "--checkpoint", "999999"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint at step 999999" in err and "checkpoints kept:" in err and "Traceback" not in err
    assert main(["eval", str(trained), "env.bogus=1"]) == 2
    assert "unknown key 'env.bogus'" in capsys.readouterr().err


def test_load_returns_a_policy_that_acts(trained):
    import numpy as np

    import r2ac
    from r2ac.envs import make_vec_env

    policy = r2ac.load(str(trained), greedy=True)
    assert policy.num_actions > 1 and policy.step >= 1200
    venv = make_vec_env(policy.config.env.id, 3, 0, **policy.config.env.options)
    obs, state, reward, done = venv.reset(), policy.initial_state(3), None, None
    finished = 0
    for _ in range(40):
        action, state = policy.act(obs, state, reward=reward, done=done)
        assert action.shape == (3,) and action.dtype.kind == "i"
        obs, reward, done, info = venv.step(action)
        finished += int(done.sum())
    venv.close()
    assert finished > 0
    one, _ = policy.act(obs[0], None)  # a single observation gives a single action
    assert np.ndim(one) == 0
    with pytest.raises(ValueError, match="initial_state"):
        policy.act(obs, policy.initial_state(2))


def test_corrupt_checkpoint_is_one_line(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ckpt_100.pt").write_bytes(b"not a checkpoint" * 8)
    (tmp_path / "config.yaml").write_text("name: x\n")
    for argv in (["eval", str(tmp_path)], ["train", "--resume", str(tmp_path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err and "corrupt" in err, err
    assert main(["eval", str(tmp_path / "checkpoints" / "ckpt_100.pt")]) == 2
    assert "corrupt" in capsys.readouterr().err
