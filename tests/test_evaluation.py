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


def test_quota_keeps_each_taken_episodes_end_statistics():
    from r2ac.evaluation import summarize_episode_infos

    q = EpisodeQuota(2, 3)
    nan = float("nan")
    q.add(np.array([True, False]), np.array([1.0, 0.0]),
          info={"score": np.array([5.0, nan]), "truncated": np.array([0.0, 0.0]), "flag": np.array([1, 1])})
    q.add(np.array([True, True]), np.array([2.0, 3.0]), info={"score": np.array([nan, 7.0])})
    q.add(np.array([True, True]), np.array([9.0, 9.0]), info={"score": np.array([8.0, 8.0])})  # past the quota
    assert q.returns() == [1.0, 3.0, 2.0]
    infos = q.episode_infos()
    assert [d["score"] for d in infos[:2]] == [5.0, 7.0] and np.isnan(infos[2]["score"])
    assert set(infos[0]) == {"score"}  # standard keys and integer arrays are not task statistics
    assert summarize_episode_infos(infos) == {"score": {"mean": 6.0, "count": 2}}
    assert np.isnan(summarize_episode_infos([{"x": nan}])["x"]["mean"])


def test_watermaze_statistics_tell_a_remembering_agent_from_a_searching_one():
    """Through ``play``: a policy that searches at random until it has found the goal once and then walks
    straight back to it (it peeks at the env's goal, standing in for a memory) returns in fewer steps
    after the first find than before it; the pure random search does not."""
    from r2ac.envs import make_vec_env
    from r2ac.evaluation import play, summarize_episode_infos

    class Scripted:
        def __init__(self, venv, remember):
            self.venv, self.remember, self.rng = venv, remember, np.random.default_rng(0)

        def initial_state(self, n):
            return np.zeros(n, dtype=bool)  # found the goal this episode

        def act(self, obs, found, reward=None, done=None, greedy=False):
            if done is not None:
                found = np.where(done, False, found | (reward > 0))
            action = self.rng.integers(0, 4, size=len(found))
            if self.remember:
                S = self.venv.core.size
                ay, ax = np.divmod(self.venv.agent, S)
                gy, gx = np.divmod(self.venv.goal, S)
                home = np.where(gy < ay, 0, np.where(gx > ax, 1, np.where(gy > ay, 2, 3)))
                action = np.where(found, home, action)
            return action, found

    stats = {}
    for remember in (False, True):
        venv = make_vec_env("watermaze", 8, 3, episode_length=200)
        out = play(Scripted(venv, remember), venv, 48)
        stats[remember] = summarize_episode_infos(out["infos"])
        assert stats[remember]["goals_found"]["count"] == 48
        assert stats[remember]["goals_found"]["mean"] == pytest.approx(np.mean(out["returns"]))
    first, later = "steps_to_first_goal", "mean_steps_to_goal_after_first"
    assert stats[True][later]["mean"] < 8 < stats[True][first]["mean"]  # straight back: at most 12 steps on 7x7
    assert stats[False][later]["mean"] > 0.5 * stats[False][first]["mean"]
    assert stats[True][later]["mean"] < 0.3 * stats[False][later]["mean"]


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
    out = capsys.readouterr().out
    assert "greedy actions, seed 7" in out
    # the T-maze's own episode-end statistic: success, which is the return (wrong_reward 0)
    assert "success:" in out and "mean over the 4 episodes where defined" in out
    res = json.load(open(trained / "eval.json"))
    assert res["episode_info"]["success"] == {"mean": pytest.approx(res["mean"]), "count": 4}
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
    from r2ac.envs import make_config_env

    policy = r2ac.load(str(trained), greedy=True)
    assert policy.num_actions > 1 and policy.step >= 1200
    venv = make_config_env(policy.config.env, 3, 0)
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
    _, _, out = policy.act_with_outputs(obs, state, reward=reward, done=done)
    hidden = policy.config.model.hidden_size
    assert out["policy_logits"].shape == (3, policy.num_actions) and out["baseline"].shape == (3,)
    assert out["core_output"].shape == (3, hidden)  # what the heads read (r2ac.bench.probe's read-outs)


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


# ------------------------------------------------------------------ videos: GIF, MP4 (PyAV), W&B


def _mp4_frames(path):
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        return stream.codec_context.name, frames


def test_training_video_is_gif_and_mp4(trained):
    """The periodic evaluation's episode as a GIF and as an H.264 MP4 of the same frames (PyAV, in the dev
    extra): the MP4 lasts as long as the GIF, at the GIF's size, showing the same pictures."""
    from PIL import Image

    gif = sorted((trained / "videos").glob("eval_step*_sampled.gif"))[0]
    mp4 = gif.with_suffix(".mp4")
    assert mp4.exists() and mp4.stat().st_size > 100
    codec, frames = _mp4_frames(mp4)
    with Image.open(gif) as im:
        size, duration = im.size, 0
        for i in range(im.n_frames):  # Pillow merges repeated frames into one shown longer
            im.seek(i)
            duration += im.info["duration"]
        last = np.asarray(im.convert("RGB"), dtype=np.float64)
    # 15 frames/s: 66.7 ms a frame, kept in centiseconds by the GIF (repeated frames merged into one longer one)
    assert codec == "h264" and 60 * len(frames) <= duration <= 70 * len(frames)
    assert frames[0].shape[:2] == (size[1] + size[1] % 2, size[0] + size[0] % 2)
    # lossy, but the same picture: mean absolute difference of the last frame well under the 0-255 range
    assert np.abs(frames[-1][:size[1], :size[0]].astype(np.float64) - last).mean() < 12


def test_videos_without_pyav_are_gif_only(tmp_path, monkeypatch):
    import sys

    from r2ac.evaluation import write_videos

    frames = [np.full((5, 7, 3), 40 * i, dtype=np.uint8) for i in range(4)]  # odd sizes: padded in the MP4
    written = write_videos(frames, str(tmp_path / "v.gif"))
    assert [os.path.basename(p) for p in written] == ["v.mp4", "v.gif"]
    _, decoded = _mp4_frames(written[0])
    assert len(decoded) == 4 and decoded[0].shape == (6, 8, 3)
    assert abs(float(decoded[3][:5, :7].mean()) - 120) < 6
    monkeypatch.setitem(sys.modules, "av", None)  # PyAV not installed: import av raises ImportError
    assert write_videos(frames, str(tmp_path / "w.gif")) == [str(tmp_path / "w.gif")]
    assert not (tmp_path / "w.mp4").exists()


def test_eval_video_goes_to_wandb(trained, tmp_path, monkeypatch, capsys, wandb_env):
    """`r2ac eval --video` of a run logging to W&B (offline here) sends the MP4 as eval/video with the eval/
    numbers, at the checkpoint's env frames."""
    import glob

    from test_logger import wandb_history

    assert main(["eval", str(trained), "--video", "--greedy", "--episodes", "1", "--sets", "1",
                 "logger.wandb=true", "logger.wandb_mode=offline"]) == 0
    out = capsys.readouterr().out
    assert "_greedy.mp4" in out and "_greedy.gif" in out
    run_id = (trained / "wandb_run_id").read_text().strip()
    files = glob.glob(str(trained / "wandb" / f"offline-run-*-{run_id}" / f"run-{run_id}.wandb"))
    rows = [r for r in wandb_history(files[0]) if "eval/video/_type" in r]
    assert len(rows) == 1 and "eval/return_mean" in rows[0]
    # the history holds the video's fields (type, path of the copy in the run's media, size)
    assert json.loads(rows[0]["eval/video/_type"]) == "video-file"
    path = json.loads(rows[0]["eval/video/path"])
    assert path.endswith(".mp4") and rows[0]["agent_step"] == rows[0]["env_frames"]
    media = glob.glob(str(trained / "wandb" / f"offline-run-*-{run_id}" / "files" / path))
    assert media and os.path.getsize(media[0]) == os.path.getsize(
        next((trained / "videos").glob("eval_step*_greedy.mp4")))
