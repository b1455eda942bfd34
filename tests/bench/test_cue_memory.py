"""tools/cue_memory.py: the linear read-out of the cue, the per-unit SNR, and the write rates of the eLSTM's
keep gate, on synthetic data, on a hand-set network and on a real (tiny) delayed-cue run."""

import csv

import numpy as np
import pytest
import torch

from r2ac.api import Policy
from r2ac.config import load_config


def test_linear_decode_and_unit_snr(load_tool):
    tool = load_tool("cue_memory")
    rng = np.random.default_rng(0)
    cue = rng.integers(0, 3, 400)
    noise = rng.normal(size=(400, 5))
    # the cue in a low-variance direction under a large common mode: each unit is noise, the read-out is exact
    common = 100 * rng.normal(size=(400, 1))
    c = noise * 1e-3 + common + np.eye(3)[cue] @ rng.normal(size=(3, 5)) * 0.1
    assert tool.linear_decode(c, cue, 3) == 1.0
    assert tool.unit_snr(c, cue, 3).max() < 1e-2
    assert tool.linear_decode(noise, cue, 3) < 0.5  # nothing to read: about chance (1/3)
    held = np.eye(3)[cue][:, :2] + 0.01 * noise[:, :2]  # units 0 and 1 hold cues 0 and 1
    snr = tool.unit_snr(held, cue, 3)
    assert snr.min() > 1e2


def test_answer_shares_by_cue(load_tool):
    tool = load_tool("cue_memory")
    cue = np.array([0, 0, 1, 1, 1, 1, 2, 2])
    answer = np.array([0, 0, 1, 1, 1, 2, 1, 1])  # cue 2 always named as cue 1, cue 1 right 3 times in 4
    shares = tool.answer_shares(cue, answer, 3)
    assert np.allclose(shares, [[1, 0, 0], [0, 0.75, 0.25], [0, 1, 0]])
    assert tool.by_cue(shares) == "1.00/0.75/0.00"
    assert tool.rows_text(shares) == "1.00 0.00 0.00 | 0.00 0.75 0.25 | 0.00 1.00 0.00"
    assert np.isnan(tool.answer_shares(np.array([0, 1]), np.array([0, 1]), 3)[2]).all()  # cue 2 never dealt
    rng = np.random.default_rng(1)
    cue = rng.integers(0, 3, 600)
    c = np.eye(3)[np.where(cue == 2, 1, cue)] + 0.01 * rng.normal(size=(600, 3))  # cues 1 and 2 stored alike
    guess, truth = tool.linear_readout(c, cue, 3)
    per_cue = np.diag(tool.answer_shares(truth, guess, 3))
    assert per_cue[0] == 1.0 and per_cue[1] + per_cue[2] < 1.2  # 1 and 2 told apart at chance only
    assert tool.linear_decode(c, cue, 3) == pytest.approx(float((guess == truth).mean()))


def test_write_rates_of_a_hand_set_network(tmp_path, load_tool):
    """F = 0, w_f = 0, b_f = 0: the keep gate is 0.5 on every frame, so each write rate is exactly 0.5."""
    tool = load_tool("cue_memory")
    cfg = load_config("configs/quickstart.yaml", ["env.id=cue", "env.options={span: 4, distractors: 0.5}",
                                                 "model.hidden_size=16"])
    from r2ac.agent.nets import AgentNet

    torch.manual_seed(0)  # the read-out of a cue after noise frames needs enough units and episodes: with 4
    net = AgentNet.from_config(cfg.model, (3, 16, 16), 3)  # units and 40 episodes a third of random nets fail
    with torch.no_grad():
        for p in (net.core.F, net.core.w_f, net.core.b_f):
            p.zero_()
    net.observation_shape = (3, 16, 16)
    r = tool.probe(Policy(net, cfg), {"span": 4, "distractors": 0.5}, 40)
    assert r["write_cue"] == r["write_noise"] == r["write_blank"] == pytest.approx(0.5)
    assert r["decode_t0"] == 1.0  # the cue frame was just written
    # a cue at an unknown time (cue_delay) and drawn spans (span_min): read right after each episode's own cue
    # frame and at its own query; every frame before and after the cue counts as blank or noise
    opts = {"span": 6, "span_min": 2, "cue_delay": 5, "distractors": 0.5}
    r = tool.probe(Policy(net, cfg), opts, 200)
    assert r["write_cue"] == r["write_noise"] == r["write_blank"] == pytest.approx(0.5)
    assert r["decode_t0"] >= 0.8 and 0.0 <= r["policy"] <= 1.0 and 0.0 <= r["greedy"] <= 1.0  # noise before it
    with torch.no_grad():  # f = 0: c holds only the frame just seen, so the cue is in c right after its own
        net.core.b_f.fill_(-30.0)  # step (at whatever step each episode shows it) and gone at the query
        net.core.w_z.zero_()  # z from the frame alone: not from c(t-1) ...
        net.core.Z[:, -1] = 0.0  # ... nor from the episode-start flag (the last input) where the cue is frame 0
    r = tool.probe(Policy(net, cfg), {**opts, "distractors": 0.0}, 60)
    assert r["write_cue"] == r["write_blank"] == pytest.approx(1.0)
    assert r["decode_t0"] == 1.0 and r["decode_query"] < 0.6


def test_the_probe_plays_the_runs_env_with_every_option(load_tool, monkeypatch):
    """The probe's episodes are the run's: every option of the cue env passes (cue_delay_min too: without it a
    cue trained at step 1 would be shown at step 0 or 1), and none the env does not take."""
    import functools

    tool = load_tool("cue_memory")
    seen = {}
    real = tool.CueVecEnv

    @functools.wraps(real)
    def spy(*args, **kw):
        seen.update(kw)
        return real(*args, **kw)

    monkeypatch.setattr(tool, "CueVecEnv", spy)
    cfg = load_config("configs/quickstart.yaml", ["env.id=cue", "model.hidden_size=4"])
    from r2ac.agent.nets import AgentNet

    net = AgentNet.from_config(cfg.model, (3, 16, 16), 3)
    opts = {"span": 4, "distractors": 0.5, "cue_delay": 1, "cue_delay_min": 1}
    tool.probe(Policy(net, cfg), {**opts, "not_an_option": 3}, 20)
    assert seen == opts


def test_cue_memory_reads_a_run(tmp_path, capsys, load_tool, tiny_run):
    run = tiny_run("cue", "{span: 3, distractors: 0.5}")
    tool = load_tool("cue_memory")
    out = tmp_path / "probe.csv"
    assert tool.main([str(run), "--initial", "--episodes", "60", "--out", str(out)]) == 0
    assert "| run | weights |" in capsys.readouterr().out
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["weights"] == "initial" and rows[1]["weights"].startswith("step ")
    for r in rows:
        for k in ("decode_t0", "decode_query", "policy", "greedy"):
            assert 0.0 <= float(r[k]) <= 1.0
        rows_of_answers = [[float(v) for v in row.split()] for row in r["answers"].split("|")]
        assert len(rows_of_answers) == 3 and all(sum(row) == pytest.approx(1.0, abs=0.02) for row in rows_of_answers)
        per_cue = [float(v) for v in r["policy_by_cue"].split("/")]
        assert per_cue == [row[k] for k, row in enumerate(rows_of_answers)]
        assert len(r["decode_by_cue"].split("/")) == 3
        assert 0.0 < float(r["write_cue"]) < 1.0
    with pytest.raises(SystemExit, match="not a delayed-cue run"):
        tool.main([str(run), "--set", "env.id=tmaze", "env.options={}"])
    with pytest.raises(SystemExit, match="at least 20"):
        tool.main([str(run), "--episodes", "4"])


def test_initial_weights_are_the_ones_the_run_started_from(tmp_path, monkeypatch, load_tool):
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.config import load_config
    from r2ac.runtime.local import train
    from r2ac.runtime.session import RunSession

    tool = load_tool("cue_memory")
    cfg = load_config("configs/quickstart.yaml", ["env.id=cue", "env.options={span: 3}", "env.num_envs=4",
                                                  "model.hidden_size=8", "seed=7", f"run_dir={tmp_path}",
                                                  "logger.progress_bar=false", "logger.tensorboard=false"])
    monkeypatch.setattr(RunSession, "done", lambda self: True)  # no update: the final checkpoint is the start
    train(cfg)
    start = load_latest_checkpoint(str(tmp_path))
    assert start["extra"]["learner"]["updates"] == 0
    policy = tool.policy_from_checkpoint(start, cfg)
    fresh = tool.initial_net(cfg, policy.net).state_dict()
    assert fresh.keys() == start["model"].keys()
    assert all(torch.equal(fresh[k], start["model"][k]) for k in fresh)
    other = tool.initial_net(load_config("configs/quickstart.yaml", ["env.id=cue", "env.options={span: 3}",
                                                                     "model.hidden_size=8", "seed=8"]), policy.net)
    assert not torch.equal(other.state_dict()["core.Z"], fresh["core.Z"])  # another seed, other weights
