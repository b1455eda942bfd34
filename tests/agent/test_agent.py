"""Actor, learner and runtime tests on the built-in T-maze (real envs, real files)."""

import copy
import json
import math
import os

import pytest
import torch

from r2ac.agent.actor import Actor
from r2ac.agent.learner import Learner, NonFiniteLossError, make_target_net, target_values
from r2ac.agent.losses import impala_loss
from r2ac.agent.inputs import centre_frame, channel_spread, lower_median
from r2ac.agent.nets import RAW_PIXEL_EPISODE_START_VALUE, RAW_PIXEL_INPUT_SCALE, WIDE_INPUT_ENTRIES, AgentNet
from r2ac.agent.trajectory import Batcher, concat, validate
from r2ac.config import ConfigError, config_from_dict, config_to_dict, load_config, upgrade_resolved
from r2ac.envs import make_vec_env

M = 6


def _net(learning="rtrl", core="elstm", dtype=torch.float64, seed=0, frozen=True, pixels=False, head=False):
    """A small agent on the T-maze; ``pixels`` (a model.frame_centre value): on the pixel delayed cue
    (4x4 frames, span 3) with the raw frames centred into the core (stem none, model.centre_frames) and the
    episode-start flag; ``head``: heads with a hidden layer that see the core's input too (model.head_hidden,
    model.head_input), or "norm": linear heads on the layer-normalised output (model.head_norm)."""
    torch.manual_seed(seed)
    if pixels == "observations":  # the delayed cue's vectors into the core as they are, minus their running mean
        venv = make_vec_env("cue", 3, seed, obs="vector", span=3, distractors=0.5)
        kw = dict(stem="none", centre_observations=True)
    elif pixels:  # "<frame_centre>[+spread][+running][+contrasts][+pool2][+extremes][+centroids]": frame_spread,
        # running_centres, centre_basis, frame_pool (8 x 8 frames pooled by 2 into the 4 x 4 of the others),
        # frame_extremes, frame_centroids
        centre, *extra = pixels.split("+")
        pool = 2 if "pool2" in extra else 1
        venv = make_vec_env("cue", 3, seed, obs="pixels", size=4 * pool, span=3, distractors=0.5)
        kw = dict(stem="none", centre_frames=True, frame_centre=centre, episode_start_input=True,
                  frame_spread="spread" in extra, running_centres="running" in extra,
                  centre_basis="contrasts" if "contrasts" in extra else "channels", frame_pool=pool,
                  frame_extremes="extremes" in extra, frame_centroids="centroids" in extra)
    else:
        venv = make_vec_env("tmaze", 3, seed, corridor_length=4)
        kw = dict(stem="mlp", stem_channels=[], stem_fc=8)
    if head == "norm":  # linear heads on the layer-normalised core output (model.head_norm)
        kw.update(head_norm=True)
    elif head:
        kw.update(head_hidden=7, head_input=True)
    net = AgentNet(venv.observation_shape, venv.num_actions, core=core, hidden_size=5, learning=learning,
                   core_options={"forget_bias_init": 1.0} if core == "elstm" else {}, **kw)
    net = net.to(dtype)
    if frozen:
        net.freeze_stem()
    if getattr(net, "running_centres", False):  # a running mean away from 0 (noise frames)
        net.observe_frames(torch.randint(0, 256, (4, 3, *venv.observation_shape), dtype=torch.uint8))
        assert net.centre_mean.abs().min() > 0
    if getattr(net, "centre_observations", False):
        net.observe_frames(torch.rand(4, 3, *venv.observation_shape, dtype=dtype))
        assert net.observation_mean.abs().min() > 0
    return net, venv


def _learner_cfg(**kw):
    return load_config(None, [f"learner.{k}={v}" for k, v in kw.items()]).learner


def _inputs(traj):
    return {"obs": traj["obs"], "reward": traj["reward"], "action": traj["action"], "done": traj["done"]}


def test_actor_carries_state_and_sensitivities_across_trajectories():
    net, venv = _net()
    actor = Actor(net, venv, M, seed=1)
    trajs = [actor.rollout() for _ in range(4)]
    assert all(not t["initial_state"]["c"].requires_grad for t in trajs)
    assert any(t["done"][1:].any() for t in trajs)  # episodes end inside trajectories (resets)
    for a, b in zip(trajs, trajs[1:]):
        # the overlap frame: last frame of one trajectory is the first of the next
        for k in ("obs", "reward", "done", "action", "policy_logits"):
            assert torch.equal(a[k][-1], b[k][0])
        # re-running the first with the (unchanged) weights from its shipped state gives the next's state
        with torch.no_grad():
            inp = {k: v[:-1] for k, v in _inputs(a).items()}
            _, nxt = net(inp, a["initial_state"])
        for k, v in b["initial_state"].items():
            assert torch.allclose(nxt[k], v, rtol=1e-10, atol=1e-12), k
    first = trajs[0]["initial_state"]
    assert all((v == 0).all() for v in first.values())  # a fresh episode starts from zeros


@pytest.mark.parametrize("desync", [False, True])
def test_actor_desync_starts_the_envs_at_random_steps(desync):
    venv = make_vec_env("cue", 16, 0, span=8, obs="vector")
    net = AgentNet(venv.observation_shape, venv.num_actions, core="elstm", hidden_size=4, stem="none")
    actor = Actor(net, venv, M, seed=1, desync=desync)
    assert actor._last["done"].all()  # a fresh episode for the core in every env either way
    ends = torch.cat([t["done"][1:].nonzero()[:, 0] + M * i for i, t in enumerate(actor.rollout() for _ in range(2))])
    # without desync every env's first episode ends at step 10 (span + 2); with it they end all over
    assert (len(set(ends.tolist())) > 4) == desync
    actor.restart()  # a restart (after an env failure) desyncs again
    assert (len(set(venv.t.tolist())) > 1) == desync


def test_actor_resets_state_at_episode_start():
    net, venv = _net()
    actor = Actor(net, venv, M, seed=2)
    for _ in range(6):
        traj = actor.rollout()
    nxt = actor.state
    last_done = traj["done"][-1]
    # envs whose new episode starts at the overlap frame: nothing is reset yet in the shipped state
    # (reset happens before processing that frame) -> re-running that frame from the state gives the
    # same result as from zeros
    if last_done.any():
        b = int(last_done.nonzero()[0])
        with torch.no_grad():
            one = {k: v[-1:, b:b + 1] for k, v in _inputs(traj).items()}
            y1, s1 = net(one, {k: v[b:b + 1] for k, v in nxt.items()})
            y0, s0 = net(one, net.initial_state(1))
        assert torch.allclose(y1["policy_logits"], y0["policy_logits"])
        for k in s1:
            assert torch.allclose(s1[k], s0[k])


def _loss(net, outputs, traj, boot=None, target_pg=True):
    loss, _ = impala_loss(outputs, traj, discount=0.9, baseline_cost=0.5, entropy_cost=0.01, reward_clip=1.0,
                          target_values=boot, target_pg=target_pg)
    return loss


@pytest.mark.parametrize("learning, pixels, head", [
    ("rtrl", False, False), ("tbptt", False, False), ("rtrl", "mean", False), ("rtrl", "median", False),
    ("rtrl", "median_mean", False), ("rtrl", "median_feed_mean", False),
    ("rtrl", "median_feed_mean+spread+running", False), ("rtrl", "median_mean+running+contrasts", False),
    ("rtrl", "median_feed_mean+extremes+centroids+running+contrasts", False),
    ("rtrl", False, True), ("tbptt", False, True),
    ("rtrl", "median_feed_mean", True), ("rtrl", False, "norm"), ("rtrl", "observations", False)])
def test_learner_gradient_on_shipped_trajectories_vs_full_episode_bptt(learning, pixels, head):
    """float64: the sum of the learner's per-trajectory gradients equals full-sequence BPTT of the same
    losses when actor and learner weights agree (RTRL), and differs for TBPTT; also with raw pixel frames
    centred into the core and the episode-start flag (stem none casts uint8 frames to the default dtype),
    and with a hidden head layer that sees the core's input."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _check_learner_gradient_vs_full_bptt(learning, pixels, head)
    finally:
        torch.set_default_dtype(default)


def _check_learner_gradient_vs_full_bptt(learning, pixels, head=False, target=False, target_pg=True):
    net, venv = _net(learning, pixels=pixels, head=head)
    actor = Actor(copy.deepcopy(net), venv, M, seed=3)
    K = 8
    trajs = [actor.rollout() for _ in range(K)]
    params = dict((n, p) for n, p in net.named_parameters() if p.requires_grad)
    boots = [None] * K
    if target:  # learner.target_tau: V-trace bootstraps from another network's values, run from the shipped state
        target_net = make_target_net(net)
        with torch.no_grad():
            for p in target_net.parameters():
                p.add_(0.3 * torch.randn_like(p))
        boots = [target_values(target_net, _inputs(t), t["initial_state"]) for t in trajs]
        own = [net(_inputs(t), t["initial_state"], return_state=False)[0]["baseline"].detach() for t in trajs]
        assert all((b - o).abs().max() > 1e-3 for b, o in zip(boots, own))  # the targets do differ
    # learner: one update per trajectory, gradients summed
    net.zero_grad()
    for t, boot in zip(trajs, boots):
        out, _ = net(_inputs(t), t["initial_state"], return_state=False)
        _loss(net, out, t, boot, target_pg).backward()
    learner_grads = {n: p.grad.clone() for n, p in params.items()}
    # full sequence: all K*M + 1 frames from the zero state, one BPTT pass over everything
    full = {k: torch.cat([trajs[0][k][:1]] + [t[k][1:] for t in trajs]) for k in _inputs(trajs[0])}
    for k in ("policy_logits", "episode_return", "episode_length"):
        full[k] = torch.cat([trajs[0][k][:1]] + [t[k][1:] for t in trajs])
    rtrl_net = net if learning == "rtrl" else _net("rtrl", pixels=pixels, head=head)[0]
    rtrl_net.load_state_dict(net.state_dict())
    rtrl_net.zero_grad()
    out, _ = rtrl_net(_inputs(full), rtrl_net.initial_state(3), return_state=False)
    total = 0
    for i, t in enumerate(trajs):
        window = {k: v[i * M:(i + 1) * M + 1] for k, v in out.items()}
        total = total + _loss(rtrl_net, window, t, boots[i], target_pg)
    total.backward()
    bptt = {n: p.grad.clone() for n, p in rtrl_net.named_parameters() if p.requires_grad}
    errs = {n: ((learner_grads[n] - bptt[n]).abs().max() / bptt[n].abs().max()).item() for n in params}
    if learning == "rtrl":
        assert max(errs.values()) < 1e-9, errs
    else:
        assert max(errs[n] for n in ("core.F", "core.Z", "core.w_f", "core.b_f")) > 1e-3, errs


def test_a_float64_net_on_8bit_frames_needs_no_float64_default():
    """A net moved to float64 (``.to(torch.float64)``, ``.double()``) with the raw frames into the core (stem
    none) takes an env's uint8 frames as they come, with float32 the default dtype: the features enter in the
    core's dtype (once a TypeError in the actor), and the learner's gradient is still full-sequence BPTT's."""
    assert torch.get_default_dtype() == torch.float32
    _check_learner_gradient_vs_full_bptt("rtrl", "median_feed_mean+running+contrasts")


@pytest.mark.parametrize("learning, target_pg", [("rtrl", True), ("tbptt", True), ("rtrl", False)])
def test_learner_gradient_with_a_target_network_vs_full_episode_bptt(learning, target_pg):
    """float64, learner.target_tau: with V-trace bootstrapping from a target network's values (no gradient
    through them; for the value targets and the advantages, or with learner.target_pg=false for the value
    targets alone), the RTRL learner's gradient is still full-sequence BPTT's of the same losses."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _check_learner_gradient_vs_full_bptt(learning, False, target=True, target_pg=target_pg)
    finally:
        torch.set_default_dtype(default)


def test_learner_update_reduces_loss_on_fixed_batch():
    net, venv = _net(dtype=torch.float32, frozen=False)
    actor = Actor(copy.deepcopy(net), venv, M, seed=4)
    batch = concat([actor.rollout() for _ in range(4)])
    learner = Learner(net, _learner_cfg(learning_rate=3e-4, lr_schedule="constant", entropy_cost=0.0), 10**6)

    def loss_now():
        with torch.no_grad():
            out, _ = net(_inputs(batch), batch["initial_state"], return_state=False)
            return impala_loss(out, batch, discount=0.99, baseline_cost=0.5, entropy_cost=0.0)[0].item()

    before = loss_now()
    for _ in range(10):
        stats = learner.update(batch)
    assert loss_now() < before
    assert learner.updates == 10 and learner.steps == 10 * M * 12
    assert stats["policy_lag_mean"] == 9 and stats["grad_norm"] > 0


def test_nonfinite_loss_is_skipped_then_stops():
    net, venv = _net(dtype=torch.float32)
    actor = Actor(copy.deepcopy(net), venv, M, seed=5)
    batch = actor.rollout()
    batch["reward"] = batch["reward"].clone()
    batch["reward"][2, 0] = float("nan")
    learner = Learner(net, _learner_cfg(max_nonfinite_updates=2, reward_clip=0.0), 10**6)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    learner.update(batch)
    learner.update(batch)
    assert learner.skipped == 2 and learner.updates == 0
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    with pytest.raises(NonFiniteLossError, match="max_nonfinite_updates"):
        learner.update(batch)


def test_gradient_spike_from_exploded_sensitivities_is_skipped():
    """learner.grad_spike_factor: a batch whose shipped RTRL sensitivities exploded (as when the core's dynamics
    turn expanding along an episode) gives a gradient norm far above the recent median: skipped, weights kept;
    the same batch is applied when the check is off."""
    net, venv = _net(dtype=torch.float32)
    actor = Actor(copy.deepcopy(net), venv, M, seed=5)
    batch = concat([actor.rollout() for _ in range(2)])
    exploded = dict(batch, initial_state=dict(batch["initial_state"]))
    for k in net.core.sensitivity_keys:
        exploded["initial_state"][k] = batch["initial_state"][k] * 1e9
    assert any(batch["initial_state"][k].abs().max() > 0 for k in net.core.sensitivity_keys)
    learner = Learner(net, _learner_cfg(grad_spike_factor=100, lr_schedule="constant"), 10**6)
    for _ in range(20):
        stats = learner.update(batch)
    assert learner.updates == 20 and stats["spike_skipped_updates"] == 0
    before = {k: v.clone() for k, v in net.state_dict().items()}
    stats = learner.update(exploded)
    assert stats["grad_norm"] > 100 * learner.recent_norms[-1]
    assert learner.spikes == 1 and stats["spike_skipped_updates"] == 1 and learner.updates == 20
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    learner.update(batch)
    assert learner.updates == 21 and learner.spikes_in_row == 0
    off = Learner(copy.deepcopy(net), _learner_cfg(lr_schedule="constant"), 10**6)
    stats = off.update(exploded)
    assert off.updates == 1 and "spike_skipped_updates" not in stats


def test_gradient_spike_window_starts_afresh_after_a_run_of_spikes():
    from r2ac.agent.learner import SPIKE_WARMUP, SPIKE_WINDOW

    net, _ = _net(dtype=torch.float32)
    learner = Learner(net, _learner_cfg(grad_spike_factor=10), 10**6)
    assert not any(learner._is_spike(1e6 if i == 0 else 1.0) for i in range(SPIKE_WARMUP))  # warm-up: none
    assert learner._is_spike(11.0) and not learner._is_spike(9.0)
    spikes = [learner._is_spike(1e3) for _ in range(SPIKE_WINDOW)]
    assert all(spikes) and len(learner.recent_norms) == 0  # the norms moved for good: start afresh
    assert not any(learner._is_spike(1e3) for _ in range(SPIKE_WARMUP))
    assert learner.spikes == SPIKE_WINDOW + 1


def test_contractive_core_is_projected_after_every_update():
    """model.core_options.contractive: the learners move the eLSTM's (w_f, w_z) back to 2|w_f| + |w_z| <= 1
    after each optimizer step (IMPALA, and A2C through the same Learner)."""
    net, venv = _net(dtype=torch.float32)
    net.core.contractive = True
    actor = Actor(copy.deepcopy(net), venv, M, seed=5)
    batch = actor.rollout()
    with torch.no_grad():
        net.core.w_f.fill_(2.0)
    learner = Learner(net, _learner_cfg(lr_schedule="constant", learning_rate=0.5), 10**6)
    learner.update(batch)
    bound = 2 * net.core.w_f.abs() + net.core.w_z.abs()
    assert learner.updates == 1 and (bound <= 1 + 1e-6).all() and bound.max() > 0.99


def test_grad_spike_factor_at_most_one_is_rejected():
    with pytest.raises(ConfigError, match="grad_spike_factor"):
        _learner_cfg(grad_spike_factor=0.5)


def test_malformed_trajectories_are_rejected_with_reason():
    net, venv = _net(dtype=torch.float32)
    actor = Actor(copy.deepcopy(net), venv, M, seed=6)
    traj = actor.rollout()
    kw = dict(unroll_length=M, num_actions=venv.num_actions, state_spec=net.core.state_spec(),
              obs_shape=venv.observation_shape)
    assert validate(traj, **kw) is None
    bad = dict(traj, reward=traj["reward"].clone())
    bad["reward"][1, 1] = float("inf")
    assert "reward has non-finite" in validate(bad, **kw)
    assert "obs has shape" in validate(dict(traj, obs=traj["obs"][:, :, :1]), **kw)
    assert "expected" in validate(dict(traj, action=traj["action"][:-1]), **kw)
    st = dict(traj["initial_state"], dc_dF=traj["initial_state"]["dc_dF"] * float("nan"))
    assert "dc_dF" in validate(dict(traj, initial_state=st), **kw)
    assert "malformed" in validate({k: v for k, v in traj.items() if k != "done"}, **kw)


def test_batcher_splits_and_joins_columns():
    net, venv = _net(dtype=torch.float32)
    actor = Actor(copy.deepcopy(net), venv, M, seed=7)
    b = Batcher(4)
    out = []
    for _ in range(4):
        out += b.add(actor.rollout())  # 3 columns each -> batches of 4
    assert len(out) == 3 and all(x["reward"].shape == (M + 1, 4) for x in out)
    assert all(x["initial_state"]["dc_dF"].shape[0] == 4 and x["version"].shape == (4,) for x in out)


def _cfg(tmp_path, *extra):
    return load_config("configs/quickstart.yaml", [
        f"run_dir={tmp_path}", "total_steps=3000", "env.num_envs=8", "learner.batch_size=8",
        "model.hidden_size=16", "logger.log_interval_s=0.01", "logger.tensorboard=false",
        "checkpoint.interval_s=0.2", "logger.progress_bar=false", *extra])


def test_train_writes_outputs_and_resume_continues(tmp_path):
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.evaluation import evaluate_checkpoint
    from r2ac.runtime.local import train

    s = train(_cfg(tmp_path))
    assert s["status"] == "finished" and s["step"] >= 3000
    for f in ("config.yaml", "metrics.csv", "learning_curve.png", "summary.json"):
        assert os.path.exists(tmp_path / f), f
    ck = load_latest_checkpoint(str(tmp_path))
    updates = ck["extra"]["learner"]["updates"]
    assert updates > 0 and ck["extra"]["learner"]["optimizer"]["state"]
    with pytest.raises(FileExistsError, match="--resume"):
        train(_cfg(tmp_path))
    s2 = train(_cfg(tmp_path, "total_steps=6000"), resume=True)
    ck2 = load_latest_checkpoint(str(tmp_path))
    assert s2["step"] >= 6000 and ck2["extra"]["learner"]["updates"] > updates
    # optimizer state continued: RMSProp's step count kept growing from the saved one
    steps1 = ck["extra"]["learner"]["optimizer"]["state"][0]["step"]
    steps2 = ck2["extra"]["learner"]["optimizer"]["state"][0]["step"]
    assert float(steps2) == float(steps1) + (ck2["extra"]["learner"]["updates"] - updates)
    rows = open(tmp_path / "metrics.csv").read().splitlines()
    col = rows[0].split(",").index("step")
    steps = [int(float(r.split(",")[col])) for r in rows[1:]]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    res = evaluate_checkpoint(str(tmp_path), sets=2, episodes=5)
    assert len(res["set_means"]) == 2 and 0.0 <= res["mean"] <= 1.0 and math.isfinite(res["std"])


def test_local_runs_repeat_bit_for_bit(tmp_path):
    """The local runtime is a function of its config and seed on one machine: two runs of the same seed end
    with the same weights and optimizer state, bit for bit, however the wall clock went (docs/results.md,
    "A margin on the pull"); another seed ends elsewhere."""
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.runtime.local import train

    def weights(d, *extra):
        train(_cfg(tmp_path / d, "total_steps=2000", "checkpoint.interval_s=.inf", *extra))
        ck = load_latest_checkpoint(str(tmp_path / d))
        return ck["model"], ck["extra"]["learner"]["optimizer"]["state"][0]["exp_avg"]

    (wa, ma), (wb, mb), (wc, _) = weights("a"), weights("b"), weights("c", "seed=1")
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa) and torch.equal(ma, mb)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)


def test_short_run_reports_trained_random_and_training_windows(tmp_path, capsys):
    from r2ac.experiments.short_run import main

    out = tmp_path / "run"
    assert main(["configs/quickstart.yaml", "total_steps=2000", "env.num_envs=8", "learner.batch_size=8",
                 "model.hidden_size=16", "logger.log_interval_s=0.01", "logger.tensorboard=false",
                 "--episodes", "6", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "uniform random policy" in text and "untrained network" in text and "last 10 %" in text
    rows = open(out / "results.csv").read().splitlines()
    assert rows[0] == "policy,mean_return,sem,episodes" and len(rows) == 6
    ev = json.load(open(out / "eval.json"))
    assert len(ev["episode_returns"]) == 6 and all(0.0 <= r <= 1.0 for r in ev["episode_returns"])
    # --eval-only re-evaluates the finished run, and refuses one trained with another config
    args = ["configs/quickstart.yaml", "total_steps=2000", "env.num_envs=8", "learner.batch_size=8",
            "model.hidden_size=16", "--episodes", "4", "--out", str(out), "--eval-only"]
    assert main(args) == 0 and len(json.load(open(out / "eval.json"))["episode_returns"]) == 4
    with pytest.raises(ValueError, match="different config"):
        main(args[:4] + ["model.hidden_size=8"] + args[5:])


def test_cli_errors_are_clear(tmp_path, capsys):
    from r2ac.cli import main

    assert main(["train", "configs/quickstart.yaml", f"run_dir={tmp_path}", "learner.unrol_length=5"]) == 2
    err = capsys.readouterr().err
    assert "learner.unrol_length" in err and "unroll_length" in err
    assert main(["eval", str(tmp_path / "nothing")]) == 2
    assert "no such run directory" in capsys.readouterr().err


@pytest.mark.parametrize("core", sorted(__import__("r2ac.cores", fromlist=["CORES"]).CORES))
def test_every_core_drives_the_agent(core):
    """Any core from make_core is usable as the R2AC core: actor rollouts (with RTRL state where the core
    has it), trajectory validation and a finite learner update."""
    from r2ac.cores import CORES

    learning = "rtrl" if CORES[core].supports_rtrl else "tbptt"
    torch.manual_seed(0)
    venv = make_vec_env("tmaze", 2, 0, corridor_length=3)
    opts = {"columns_per_stage": 2} if core == "ccn" else {}
    net = AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8, core=core,
                   hidden_size=4, learning=learning, core_options=opts)
    actor = Actor(copy.deepcopy(net), venv, M, seed=0)
    learner = Learner(net, _learner_cfg(batch_size=2), 10**6)
    for _ in range(2):
        traj = actor.rollout()
        assert validate(traj, unroll_length=M, num_actions=venv.num_actions, state_spec=net.core.state_spec(),
                        obs_shape=venv.observation_shape) is None
        stats = learner.update(traj)
        actor.set_weights(net.state_dict(), learner.updates)
    assert learner.updates == 2 and math.isfinite(stats["total_loss"]) and math.isfinite(stats["grad_norm"])


def test_head_options_add_a_hidden_layer_that_sees_the_core_input():
    """model.head_hidden / model.head_input: the default adds no parameter (the papers' linear heads, the same
    state-dict keys and initial weights); head_input widens the heads by the core's input and feeds it (a
    change in x alone moves the logits when the core's output is held); bad values are refused."""
    base, venv = _net(dtype=torch.float32)
    assert base.head_trunk is None and not any(k.startswith("head_trunk") for k in base.state_dict())
    plain, _ = _net(dtype=torch.float32)
    assert all(torch.equal(a, b) for a, b in zip(base.state_dict().values(), plain.state_dict().values()))
    net, _ = _net(dtype=torch.float32, head=True)
    N, D = net.core.output_size, net.core_input_size
    assert net.head_trunk[0].in_features == N + D and net.policy.in_features == 7
    y, x = torch.zeros(2, 3, N), torch.zeros(2, 3, D)
    x2 = x.clone()
    x2[..., 0] = 1.0
    with torch.no_grad():
        assert not torch.allclose(net.heads(y, x)["policy_logits"], net.heads(y, x2)["policy_logits"])
    with pytest.raises(ValueError, match="need the core's input"):
        net.heads(y)
    linear_in = AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8,
                         hidden_size=5, head_input=True)
    assert linear_in.head_trunk is None and linear_in.policy.in_features == N + linear_in.core_input_size
    for bad, match in (({"head_hidden": -1}, "head_hidden must be a whole number"),
                       ({"head_hidden": 2.5}, "head_hidden must be a whole number"),
                       ({"head_input": "yes"}, "head_input must be true or false")):
        with pytest.raises(ValueError, match=match):
            AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8,
                     hidden_size=5, **bad)
    with pytest.raises(ConfigError, match="head_hidden"):
        load_config(None, ["model.head_hidden=-2"])


def test_head_norm_layer_normalises_the_heads_input():
    """model.head_norm: no parameters added; the heads see each step's features at one norm, so scaling the
    core's output (or shifting every unit alike) leaves logits and baseline unchanged; bad values and PPO are
    refused."""
    base, venv = _net(dtype=torch.float64)
    net, _ = _net(dtype=torch.float64, head="norm")
    assert base.head_norm is None and list(net.state_dict()) == list(base.state_dict())
    y = torch.randn(2, 3, net.core.output_size, dtype=torch.float64)
    with torch.no_grad():
        out, scaled = net.heads(y), net.heads(3.0 * y + 0.5)
        plain = base.heads(y)
    for k in ("policy_logits", "baseline"):
        assert torch.allclose(out[k], scaled[k], atol=1e-3), k  # up to LayerNorm's eps
    assert not torch.allclose(out["baseline"], plain["baseline"])
    with pytest.raises(ValueError, match="head_norm must be true or false"):
        AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8, hidden_size=5,
                 head_norm="yes")
    assert load_config(None, ["model.head_norm=true"]).model.head_norm is True
    from r2ac.runtime.ppo import build_ppo_net

    with pytest.raises(ValueError, match="model.head_norm=false with algo=ppo"):
        build_ppo_net(load_config("ppo/base.yaml", ["model.head_norm=true"]), venv)


def test_prev_action_input_auto_follows_the_task(tmp_path):
    """``model.prev_action_input: auto`` (the default) feeds the previous action where the task declares that
    its observation needs it (POPGym's bandit), not elsewhere; true and false are kept as given; the IMPALA and
    PPO networks both resolve it, and a run on the bandit trains with the action as an input."""
    from r2ac.runtime import build_net, resolve_model
    from r2ac.runtime.local import train
    from r2ac.runtime.ppo import build_ppo_net

    venv = make_vec_env("popgym:MultiarmedBanditEasy", 2, 0)
    shape, n = venv.observation_shape, venv.num_actions
    bandit = ["env.id=popgym:MultiarmedBanditEasy", "env.options={}"]
    cases = [(bandit, True), (bandit + ["model.prev_action_input=false"], False),
             ([], False), (["model.prev_action_input=true"], True)]
    assert load_config("quickstart", bandit).model.prev_action_input == "auto"  # kept as given in config.yaml
    for extra, expected in cases:
        cfg = load_config("quickstart", ["model.hidden_size=4", *extra])
        assert resolve_model(cfg).prev_action_input is expected
        if cfg.env.id.startswith("popgym"):
            net = build_net(cfg, shape, n)
            assert net.prev_action_input is expected
            base = shape[0] + 1 + int(net.episode_start_input)  # observation, reward, episode-start flag
            assert net.core_input_size == base + (n if expected else 0)
    assert build_net(load_config("quickstart"), (3, 16, 16), 3).prev_action_input is False  # the T-maze
    # built from the model config alone (tools, tests), 'auto' knows no task: no action input, and the core's
    # input width agrees
    alone = AgentNet.from_config(load_config("quickstart", bandit + ["model.hidden_size=4"]).model, shape, n)
    assert alone.prev_action_input is False and alone.core_input_size == shape[0] + 1 + int(alone.episode_start_input)
    ppo = load_config("ppo/base.yaml", [*bandit, "model.hidden_size=4", "model.prev_action_input=auto"])
    with_action = build_ppo_net(ppo, venv)
    without = build_ppo_net(load_config("ppo/base.yaml", [*bandit, "model.hidden_size=4",
                                                          "model.prev_action_input=false"]), venv)
    assert with_action.input_size == without.input_size + n
    with pytest.raises(ValueError, match="prev_action_input must be true, false or 'auto'"):
        AgentNet(shape, n, stem="mlp", stem_channels=[], stem_fc=8, hidden_size=4, prev_action_input="yes")
    venv.close()
    s = train(load_config("quickstart", [*bandit, f"run_dir={tmp_path}", "total_steps=600", "env.num_envs=4",
                                         "learner.batch_size=4", "model.hidden_size=4", "logger.tensorboard=false",
                                         "logger.progress_bar=false"]))
    assert s["status"] == "finished" and s["step"] >= 600
    assert "prev_action_input: auto" in (tmp_path / "config.yaml").read_text()


def test_input_scale_multiplies_the_features_only():
    """model.input_scale: the stem's features enter the core scaled; the reward and episode-start inputs do
    not."""
    cfg = load_config("configs/quickstart.yaml", ["model.input_scale=4.0", "env.options={corridor_length: 4}"])
    venv = make_vec_env("tmaze", 2, 0, corridor_length=4)
    net = AgentNet.from_config(cfg.model, venv.observation_shape, venv.num_actions)
    plain = AgentNet.from_config(load_config("configs/quickstart.yaml", ["model.input_scale=1"]).model,
                                 venv.observation_shape, venv.num_actions)
    obs = torch.from_numpy(venv.reset()).unsqueeze(0)
    feats = net.features(obs)
    reward, action = torch.full((1, 2), 0.5), torch.zeros(1, 2, dtype=torch.int64)
    done = torch.tensor([[False, True]])  # quickstart's episode-start flag: not scaled either
    x, x1 = net.core_input(feats, reward, action, done), plain.core_input(feats, reward, action, done)
    F = feats.shape[-1]  # the centred pixels (model.centre_frames auto); the 3 channel means, the 6 channel
    # extremes (model.frame_extremes auto) and the 6 centroids (model.frame_centroids auto) are not scaled
    assert x.shape[-1] == F + 3 + 6 + 6 + 2 and torch.allclose(x[..., :F], 4.0 * x1[..., :F])
    assert torch.equal(x[..., F:], x1[..., F:])
    assert torch.equal(x[..., -1], done.float() * RAW_PIXEL_EPISODE_START_VALUE)  # auto, raw pixels
    assert feats.abs().max() > 0
    with pytest.raises(Exception, match="input_scale"):
        load_config("configs/quickstart.yaml", ["model.input_scale=0"])


def test_previous_episode_reward_and_action_do_not_enter_the_next_episode():
    """The first frame of an episode comes with the previous episode's last reward and action: zeroed there
    by default (the core state is reset there too, so nothing of the last episode reaches the new one), fed
    as is with model.carry_inputs_across_episodes=true (IMPALA's input)."""
    torch.manual_seed(0)
    kw = dict(stem="none", core="elstm", hidden_size=6, learning="rtrl", prev_action_input=True)
    net = AgentNet((4,), 3, **kw)
    carry = AgentNet((4,), 3, carry_inputs_across_episodes=True, **kw)
    carry.load_state_dict(net.state_dict())
    T, B = 5, 2
    obs = torch.randn(T, B, 4)
    done = torch.zeros(T, B, dtype=torch.bool)
    done[0] = True
    done[3, 1] = True  # env 1 starts a new episode at t = 3
    reward, action = torch.ones(T, B), torch.full((T, B), 2, dtype=torch.int64)
    x = net.core_input(net.features(obs), reward, action, done)
    xc = carry.core_input(carry.features(obs), reward, action, done)
    assert torch.equal(x[..., :4], xc[..., :4])  # the observation is never touched
    assert x[0, :, 4:].abs().sum() == 0 and x[3, 1, 4:].abs().sum() == 0  # reward and one-hot action zeroed
    assert torch.equal(x[3, 0], xc[3, 0]) and xc[3, 1, 4] == 1 and xc[3, 1, 4 + 1 + 2] == 1
    # so the policy's output in a new episode cannot depend on how the last one ended ...
    state = net.initial_state(B)
    inputs = {"obs": obs[:1], "action": action[:1], "done": done[:1]}
    out1, _ = net({**inputs, "reward": torch.ones(1, B)}, state)
    out0, _ = net({**inputs, "reward": torch.zeros(1, B)}, state)
    assert torch.equal(out1["policy_logits"], out0["policy_logits"])
    # ... unless the inputs are carried
    c1, _ = carry({**inputs, "reward": torch.ones(1, B)}, state)
    c0, _ = carry({**inputs, "reward": torch.zeros(1, B)}, state)
    assert not torch.equal(c1["policy_logits"], c0["policy_logits"])
    assert load_config("configs/quickstart.yaml").model.carry_inputs_across_episodes is False


def test_episode_start_input_marks_the_first_frame_of_an_episode():
    """model.episode_start_input: one more core input, 1 where the frame starts an episode; PPO refuses it."""
    torch.manual_seed(0)
    flag = AgentNet((4,), 3, stem="none", core="elstm", hidden_size=6, episode_start_input=True)
    plain = AgentNet((4,), 3, stem="none", core="elstm", hidden_size=6)
    assert flag.core_input_size == plain.core_input_size + 1 == 4 + 1 + 1
    done = torch.tensor([[True, False], [False, True], [False, False]])
    x = flag.core_input(torch.randn(3, 2, 4), torch.ones(3, 2), torch.zeros(3, 2, dtype=torch.int64), done)
    assert torch.equal(x[..., -1], done.float()) and torch.equal(x[..., 4], (~done).float())
    with pytest.raises(ValueError, match="done flags"):
        flag.core_input(torch.randn(3, 2, 4), torch.ones(3, 2), torch.zeros(3, 2, dtype=torch.int64))
    cfg = load_config("configs/quickstart.yaml", ["model.episode_start_input=true"])
    assert AgentNet.from_config(cfg.model, (3, 8, 8), 3).episode_start_input


@pytest.mark.parametrize("stem, shape, expected", [("none", (3, 8, 8), RAW_PIXEL_EPISODE_START_VALUE),
                                                   ("none", (5,), 1.0), ("impala", (3, 16, 16), 1.0),
                                                   ("mlp", (5,), 1.0)])
def test_episode_start_value_auto_is_10_for_raw_pixels_only(stem, shape, expected):
    """episode_start_value 'auto' (the default): 10 where raw image frames enter the core (stem none), 1
    otherwise; a number overrides it; the flag input carries the value on first frames, 0 elsewhere; a
    resolved config saved before the key existed reads as 1 (the flag those runs trained with)."""
    cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}"])
    assert cfg.model.episode_start_value == "auto"
    net = AgentNet.from_config(cfg.model, shape, 3)
    assert net.episode_start_value == expected
    done = torch.tensor([[True, False], [False, True]])
    feats = torch.zeros(2, 2, net.stem.output_size)
    x = net.core_input(feats, torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.int64), done)
    assert torch.equal(x[..., -1], done.float() * expected)
    cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}", "model.episode_start_value=2.5"])
    assert AgentNet.from_config(cfg.model, shape, 3).episode_start_value == 2.5
    with pytest.raises(ConfigError, match=r"model\.episode_start_value"):
        load_config("configs/quickstart.yaml", ["model.episode_start_value=0"])
    with pytest.raises(ValueError, match="episode_start_value must be a number > 0 or 'auto'"):
        AgentNet((5,), 3, stem="none", episode_start_value="big")
    old = config_to_dict(load_config("configs/quickstart.yaml"))
    del old["model"]["episode_start_value"]
    assert config_from_dict(upgrade_resolved(old)).model.episode_start_value == 1.0


@pytest.mark.parametrize("statistic", ["mean", "median", "median_mean", "median_feed_mean"])
def test_centre_frame_recodes_a_frame_as_centred_pixels_and_channel_centres(statistic):
    """inputs.centre_frame: per channel, pixels minus their mean (median) over the frame, and the centres
    (median_mean: the medians, then the means; median_feed_mean: the means); the two together give the frame
    back; a uniform colour frame is all in the centres."""
    x = torch.rand(2, 5, 3 * 4 * 4, dtype=torch.float64)
    centred, centres = centre_frame(x, 3, statistic)
    per_channel = x.unflatten(-1, (3, 16))
    means, medians = per_channel.mean(-1), per_channel.sort(-1).values[..., 7]  # the lower middle of 16
    expected = {"mean": means, "median": medians, "median_mean": torch.cat([medians, means], -1),
                "median_feed_mean": means}[statistic]
    assert centred.shape == x.shape and centres.shape == expected.shape
    assert torch.allclose(centres, expected)
    subtracted = means if statistic == "mean" else medians
    assert torch.allclose(centred.unflatten(-1, (3, 16)) + subtracted.unsqueeze(-1), per_channel)
    # the frame back from the pair alone: the subtracted centre is the mean minus the centred pixels' mean
    recovered = centres if statistic == "median" else centres[..., -3:] - centred.unflatten(-1, (3, 16)).mean(-1)
    assert torch.allclose(centred.unflatten(-1, (3, 16)) + recovered.unsqueeze(-1), per_channel)
    red = torch.tensor([1.0, 0.0, 0.0]).repeat_interleave(16)
    c, m = centre_frame(red, 3, statistic)
    assert c.abs().max() == 0 and torch.equal(m[:3], torch.tensor([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="do not split into 3 channels"):
        centre_frame(torch.zeros(10), 3, statistic)


def test_centre_frame_median_leaves_a_black_background_at_zero():
    """The median is the background level: the watermaze's frame (coloured walls, one white agent cell on a
    black floor) passes unchanged with centres 0, where the mean makes every floor pixel non-zero."""
    venv = make_vec_env("watermaze", 4, 0, size=7, episode_length=20)
    frames = torch.as_tensor(venv.reset(), dtype=torch.float64).flatten(1) / 255
    centred, centres = centre_frame(frames, 3, "median")
    assert torch.equal(centred, frames) and torch.equal(centres, torch.zeros(4, 3))
    centred, centres = centre_frame(frames, 3, "mean")
    assert (centres > 0.1).all() and (centred == 0).float().mean() < 0.05
    centred, centres = centre_frame(frames, 3, "median_feed_mean")  # the floor stays 0, the means go in
    assert torch.equal(centred, frames) and torch.allclose(centres, frames.unflatten(-1, (3, -1)).mean(-1))
    with pytest.raises(ValueError, match="statistic must be 'mean', 'median', 'median_mean' or 'median_feed_mean'"):
        centre_frame(frames, 3, "mode")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lower_median_from_8_bit_levels_is_torch_median_bit_for_bit(dtype):
    """inputs.lower_median with the uint8 values the pixels were scaled from (numpy's radix sort) returns the
    element torch.median returns, for odd and even lengths and frames with few distinct values; without
    levels, or where a gradient is needed, it is torch.median; levels of another shape or dtype are an error.
    The agent's forward (which passes its uint8 frames) feeds the core what the plain path feeds it."""
    g = torch.Generator().manual_seed(0)
    for shape, high in (((7, 3, 256), 256), ((2, 5, 3, 17), 256), ((4, 3, 16), 3), ((1, 1, 2), 256)):
        levels = torch.randint(0, high, shape, dtype=torch.uint8, generator=g)
        x = levels.to(dtype) / 255.0
        assert torch.equal(lower_median(x, levels), x.median(-1, keepdim=True).values)
        assert torch.equal(lower_median(x), x.median(-1, keepdim=True).values)
    leaf = x.clone().requires_grad_()
    lower_median(leaf, levels).sum().backward()  # the torch path: a gradient to the median element
    assert leaf.grad.sum() == leaf.grad.shape[0]
    with pytest.raises(ValueError, match="levels must be uint8 of the shape of x"):
        lower_median(x, levels.to(torch.int16))
    with pytest.raises(ValueError, match="levels must be uint8 of the shape of x"):
        lower_median(x, levels[..., :1])
    net = AgentNet((3, 8, 8), 3, stem="none", hidden_size=4, episode_start_input=True, running_centres=True)
    obs = torch.randint(0, 256, (4, 2, 3, 8, 8), dtype=torch.uint8, generator=g)
    obs[1, 0] = 7  # a uniform frame: every pixel its median
    net.observe_frames(obs)
    inputs = {"obs": obs, "reward": torch.zeros(4, 2), "action": torch.zeros(4, 2, dtype=torch.int64),
              "done": torch.zeros(4, 2, dtype=torch.bool)}
    out, _ = net(inputs, net.initial_state(2))
    plain = net.core_input(net.features(obs), inputs["reward"], inputs["action"], inputs["done"])
    assert torch.equal(out["core_input"], plain)
    assert torch.equal(out["frame_stats"], net.frame_stats(net.features(obs))[1])


def test_centre_frames_feeds_centred_scaled_pixels_then_the_means():
    """model.centre_frames: the core sees input_scale x the centred pixels, then the C channel means
    (unscaled), then reward and flag; 'auto' centres raw image frames only; true where there is no raw
    frame is a clear error; a run saved before the key existed reads false."""
    net = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, centre_frames=True, episode_start_input=True)
    plain = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, episode_start_input=True, centre_frames=False)
    assert AgentNet((3, 4, 4), 3, stem="none").centre_frames  # the default: auto
    assert net.feature_size == 48 + 3 and net.core_input_size == plain.core_input_size + 3 == 48 + 3 + 1 + 1
    obs = torch.randint(0, 256, (2, 3, 3, 4, 4), dtype=torch.uint8)
    feats = net.features(obs)
    done = torch.zeros(2, 3, dtype=torch.bool)
    x = net.core_input(feats, torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.int64), done)
    centred, centres = centre_frame(feats, 3, "median_feed_mean")  # model.frame_centre's default
    assert net.frame_centre == "median_feed_mean"
    assert load_config("configs/quickstart.yaml").model.frame_centre == "median_feed_mean"
    assert torch.allclose(x[..., :48], RAW_PIXEL_INPUT_SCALE * centred) and torch.equal(x[..., 48:51], centres)
    by_mean = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, centre_frames=True, frame_centre="mean")
    centred, centres = centre_frame(feats, 3, "mean")
    assert torch.allclose(by_mean.scaled_features(feats), torch.cat([RAW_PIXEL_INPUT_SCALE * centred, centres], -1))
    by_median = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, centre_frames=True, frame_centre="median")
    centred, medians = centre_frame(feats, 3, "median")
    assert torch.allclose(by_median.scaled_features(feats),
                          torch.cat([RAW_PIXEL_INPUT_SCALE * centred, medians], -1))
    both = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, centre_frames=True, frame_centre="median_mean")
    assert both.feature_size == 48 + 6 and both.scaled_features(feats).shape == (2, 3, 54)
    feed = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, centre_frames=True, frame_centre="median_feed_mean")
    assert feed.feature_size == 48 + 3
    assert torch.allclose(feed.scaled_features(feats), torch.cat([RAW_PIXEL_INPUT_SCALE * centred, centres], -1))
    with pytest.raises(ValueError, match="model.frame_centre must be one of mean, median, median_mean, "
                                         "median_feed_mean"):
        AgentNet((3, 4, 4), 3, stem="none", frame_centre="mode")
    with pytest.raises(ConfigError, match=r"model\.frame_centre"):
        load_config("configs/quickstart.yaml", ["model.frame_centre=mode"])
    assert torch.equal(x[..., 51:], plain.core_input(feats, torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.int64),
                                                     done)[..., 48:])
    for stem, shape, expected in (("none", (3, 8, 8), True), ("none", (5,), False), ("impala", (3, 16, 16), False)):
        cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}"])
        assert cfg.model.centre_frames == "auto" and AgentNet.from_config(cfg.model, shape, 3).centre_frames is expected
    with pytest.raises(ValueError, match="model.centre_frames=true needs image frames"):
        AgentNet((5,), 3, stem="none", centre_frames=True)
    with pytest.raises(ConfigError, match=r"model\.centre_frames"):
        load_config("configs/quickstart.yaml", ["model.centre_frames=sometimes"])
    old = config_to_dict(load_config("configs/quickstart.yaml"))
    del old["model"]["centre_frames"], old["model"]["frame_centre"]
    upgraded = config_from_dict(upgrade_resolved(old)).model
    assert upgraded.centre_frames is False and upgraded.frame_centre == "mean"
    old = config_to_dict(load_config("configs/quickstart.yaml"))
    del old["model"]["frame_centre"]  # saved with centred frames before the key: they were centred on the mean
    assert config_from_dict(upgrade_resolved(old)).model.frame_centre == "mean"
    assert load_config("configs/quickstart.yaml").env.desync is True
    del old["env"]["desync"]  # saved before the key: the envs started in step
    assert config_from_dict(upgrade_resolved(old)).env.desync is False
    assert load_config("configs/quickstart.yaml").learner.logit_penalty == 1e-3
    del old["learner"]["logit_penalty"]  # saved before the key: no penalty on the logits
    assert config_from_dict(upgrade_resolved(old)).learner.logit_penalty == 0.0


def test_centre_basis_contrasts_recodes_the_channel_centres_by_a_rotation():
    """model.centre_basis=contrasts: each group of C centres (after the running mean) enters as their grey
    level and C - 1 contrasts (Helmert's orthonormal basis); a grey frame moves the first input alone, a
    colour the others; nothing changes where frames are not centred; a run saved before the key read
    'channels'."""
    from r2ac.agent.inputs import helmert_basis

    H = helmert_basis(3).double()
    assert torch.allclose(H @ H.T, torch.eye(3, dtype=torch.float64))
    assert torch.allclose(H, torch.tensor([[1 / 3 ** .5] * 3, [2 ** -.5, -2 ** -.5, 0],
                                           [6 ** -.5, 6 ** -.5, -2 * 6 ** -.5]], dtype=torch.float64))
    assert torch.equal(helmert_basis(1), torch.ones(1, 1))
    with pytest.raises(ValueError, match="channels must be a positive int"):
        helmert_basis(0)
    kw = dict(stem="none", hidden_size=4, episode_start_input=True, frame_centre="median_mean")
    net = AgentNet((3, 4, 4), 3, centre_basis="contrasts", running_centres=True, **kw)
    plain = AgentNet((3, 4, 4), 3, running_centres=True, **kw)
    assert net.feature_size == plain.feature_size == 48 + 6
    net.centre_mean.copy_(torch.arange(6.0) / 10)
    plain.centre_mean.copy_(net.centre_mean)
    grey = torch.full((1, 1, 3, 4, 4), 0.5)
    feats = net.features(grey)
    a, b = net.scaled_features(feats), plain.scaled_features(feats)
    assert torch.equal(a[..., :48], b[..., :48])  # the pixels as they were
    for group in (slice(48, 51), slice(51, 54)):  # the medians', then the means' group: rotated each
        assert torch.allclose(a[..., group], b[..., group] @ H.T.float(), atol=1e-6)
    plain.centre_mean.zero_()
    net.centre_mean.zero_()
    a = net.scaled_features(feats)
    assert torch.allclose(a[..., 49:51], torch.zeros(2)) and a[..., 48] > 0.8  # grey: its level, no contrast
    red = torch.zeros(1, 1, 3, 4, 4)
    red[:, :, 0] = 1.0
    a = net.scaled_features(net.features(red))
    assert torch.allclose(a[..., 48:51], torch.tensor([3 ** -.5, 2 ** -.5, 6 ** -.5]), atol=1e-6)
    vector = AgentNet((5,), 3, stem="none", hidden_size=4, centre_basis="contrasts")  # no frame: no effect
    assert torch.equal(vector.scaled_features(torch.ones(5)), torch.ones(5))
    with pytest.raises(ValueError, match="model.centre_basis must be one of channels, contrasts"):
        AgentNet((3, 4, 4), 3, stem="none", centre_basis="opponent")
    cfg = load_config("configs/quickstart.yaml", ["model.centre_basis=contrasts"])
    assert AgentNet.from_config(cfg.model, (3, 4, 4), 3).centre_basis == "contrasts"
    old = config_to_dict(cfg)
    del old["model"]["centre_basis"]
    assert config_from_dict(upgrade_resolved(old)).model.centre_basis == "channels"


def test_frame_spread_feeds_each_channels_contrast_after_the_centres():
    """model.frame_spread: C more inputs after the centres, each channel's mean |pixel - centre| over the frame
    (unscaled): 0 on a uniform frame, about 0.25 on uniform noise; it needs centred frames (a clear error
    otherwise, and with PPO); a run saved before the key read false."""
    uniform = torch.zeros(1, 3, 4, 4)
    uniform[:, 0] = 1.0  # a red frame
    assert torch.equal(channel_spread(centre_frame(uniform.flatten(1), 3, "median")[0], 3), torch.zeros(1, 3))
    frame = torch.tensor([[0.0, 0.0, 1.0, 3.0], [2.0, 2.0, 2.0, 6.0]])  # 2 channels of 2 pixels each
    centred, _ = centre_frame(frame, 2, "mean")  # rows: channels [0, 0], [1, 3] and [2, 2], [2, 6]
    assert torch.allclose(channel_spread(centred, 2), torch.tensor([[0.0, 1.0], [0.0, 2.0]]))
    noise = torch.rand(2000, 3 * 16 * 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    spread = channel_spread(centre_frame(noise, 3, "median")[0], 3)
    assert abs(spread.mean().item() - 0.25) < 0.005
    with pytest.raises(ValueError, match="channel_spread: 7 pixel features do not split into 3 channels"):
        channel_spread(torch.zeros(7), 3)
    net = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, frame_spread=True, episode_start_input=True)
    plain = AgentNet((3, 4, 4), 3, stem="none", hidden_size=4, episode_start_input=True)
    assert not plain.frame_spread and net.feature_size == plain.feature_size + 3 == 48 + 6
    obs = torch.randint(0, 256, (2, 3, 3, 4, 4), dtype=torch.uint8)
    feats = net.features(obs)
    centred, centres = centre_frame(feats, 3, "median_feed_mean")
    assert torch.allclose(net.scaled_features(feats),
                          torch.cat([RAW_PIXEL_INPUT_SCALE * centred, centres, channel_spread(centred, 3)], -1))
    x = net.core_input(feats, torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.int64),
                       torch.zeros(2, 3, dtype=torch.bool))
    assert x.shape[-1] == net.core_input_size == 48 + 6 + 1 + 1
    out, _ = net({"obs": obs, "reward": torch.zeros(2, 3), "action": torch.zeros(2, 3, dtype=torch.int64),
                  "done": torch.zeros(2, 3, dtype=torch.bool)}, net.initial_state(3))
    assert out["policy_logits"].shape == (2, 3, 3)
    assert load_config("configs/quickstart.yaml").model.frame_spread is False
    check_centred_frame_flag("frame_spread", "true or false")


def check_centred_frame_flag(key: str, allowed: str) -> None:
    """A ``model.<key>`` flag that needs centred frames: ``true`` from a config reaches the network; ``true``
    without centred frames (a flag off, or flat observations), a value outside ``allowed`` and a bad override
    are clear errors; a run saved before the key existed reads it as false."""
    cfg = load_config("configs/quickstart.yaml", [f"model.{key}=true"])
    assert getattr(AgentNet.from_config(cfg.model, (3, 4, 4), 3), key) is True
    with pytest.raises(ValueError, match=f"model.{key}=true needs centred frames"):
        AgentNet((3, 4, 4), 3, stem="none", centre_frames=False, **{key: True})
    with pytest.raises(ValueError, match=f"model.{key}=true needs centred frames"):
        AgentNet((5,), 3, stem="none", **{key: True})
    with pytest.raises(ValueError, match=f"model.{key} must be {allowed}"):
        AgentNet((3, 4, 4), 3, stem="none", **{key: "yes"})
    with pytest.raises(ConfigError, match=rf"model\.{key}"):
        load_config("configs/quickstart.yaml", [f"model.{key}=sometimes"])
    old = config_to_dict(cfg)
    del old["model"][key]
    assert getattr(config_from_dict(upgrade_resolved(old)).model, key) is False


def check_statistics_after_the_centres(key: str, statistics, others: dict, sizes: tuple) -> None:
    """A flag ``key`` that appends frame statistics after the channel centres (4 x 4 RGB frames, the centres in
    the channels basis, no running mean): the network with it has ``sizes[1]`` more inputs than without it; its
    features are the scaled centred pixels, the C centres, then ``statistics(centred)``; the fast 8-bit median
    gives the same; a forward pass runs. ``others``: the other flags, on in both networks."""
    kw = dict(stem="none", hidden_size=4, episode_start_input=True, running_centres=False, centre_basis="channels",
              **others)
    net, plain = AgentNet((3, 4, 4), 3, **kw, **{key: True}), AgentNet((3, 4, 4), 3, **kw)
    assert getattr(net, key) and not getattr(plain, key)
    assert net.feature_size == plain.feature_size + sizes[1] == 48 + 3 + sizes[0] + sizes[1]
    obs = torch.randint(0, 256, (2, 3, 3, 4, 4), dtype=torch.uint8)
    feats = net.features(obs)
    centred, centres = centre_frame(feats, 3, "median_feed_mean")
    want = torch.cat([RAW_PIXEL_INPUT_SCALE * centred, centres, *statistics(centred)], -1)
    assert torch.allclose(net.scaled_features(feats), want)
    _, stats = net.frame_stats(feats, obs)  # the fast 8-bit median gives the same statistics
    assert torch.allclose(stats, want[..., 48:])
    out, _ = net({"obs": obs, "reward": torch.zeros(2, 3), "action": torch.zeros(2, 3, dtype=torch.int64),
                  "done": torch.zeros(2, 3, dtype=torch.bool)}, net.initial_state(3))
    assert out["policy_logits"].shape == (2, 3, 3)


def test_centre_observations_subtract_the_mean_of_every_observation_trained_on():
    """model.centre_observations: flat observations (stem none) enter minus their mean over every observation
    the learner has trained on, then times input_scale; the learner folds in each applied batch's new
    observations (obs[1:]); the mean is a buffer of the state dict (actors, checkpoints); off by default and
    for runs saved before the key; a clear error with a stem or image frames."""
    net = AgentNet((6,), 3, stem="none", hidden_size=4, centre_observations=True, input_scale=0.5)
    off = AgentNet((6,), 3, stem="none", hidden_size=4, input_scale=0.5)
    assert "observation_mean" not in off.state_dict()
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(2, 5, 6, generator=g), torch.rand(3, 2, 6, generator=g) + 1
    assert torch.equal(net.scaled_features(a), off.scaled_features(a))  # nothing observed yet: mean 0
    net.observe_frames(a)
    net.observe_frames(b)
    every = torch.cat([a.reshape(-1, 6), b.reshape(-1, 6)])
    assert net.observations_seen.item() == 16 and torch.allclose(net.observation_mean, every.mean(0))
    assert torch.allclose(net.scaled_features(a), (a - every.mean(0)) * 0.5, atol=1e-6)
    fresh = AgentNet((6,), 3, stem="none", hidden_size=4, centre_observations=True)
    fresh.load_state_dict(net.state_dict())
    assert torch.equal(fresh.observation_mean, net.observation_mean)
    # the learner: one applied update observes the batch's M new observations of each of its B trajectories
    torch.manual_seed(0)
    venv = make_vec_env("cue", 3, 0, obs="vector", span=3, distractors=0.5)
    net = AgentNet(venv.observation_shape, venv.num_actions, stem="none", hidden_size=5, centre_observations=True)
    batch = Actor(copy.deepcopy(net), venv, M, seed=1).rollout()
    Learner(net, _learner_cfg(), 10**6).update(batch)
    assert net.observations_seen.item() == M * 3
    assert torch.allclose(net.observation_mean, batch["obs"][1:].reshape(-1, venv.observation_shape[0]).mean(0))
    cfg = load_config("configs/quickstart.yaml", [])
    assert cfg.model.centre_observations is False
    assert upgrade_resolved({"model": {}})["model"]["centre_observations"] is False
    with pytest.raises(ValueError, match="model.centre_observations=true is for flat observations"):
        AgentNet((6,), 3, stem="mlp", centre_observations=True)
    with pytest.raises(ValueError, match="model.centre_observations=true is for flat observations"):
        AgentNet((3, 4, 4), 3, stem="none", centre_observations=True)
    with pytest.raises(ValueError, match="model.centre_observations must be true or false"):
        AgentNet((6,), 3, stem="none", centre_observations="auto")


def test_running_centres_subtract_the_mean_of_every_frame_trained_on():
    """model.running_centres: the channel centres (and spreads) enter minus their mean over every frame the
    learner has observed; the learner folds in each applied batch's new frames (obs[1:]); the mean is a buffer
    of the state dict (actors, checkpoints); 'auto' is on with centred frames; a run saved before the key
    read false."""
    shape = (3, 4, 4)
    net = AgentNet(shape, 3, stem="none", hidden_size=4, running_centres=True, frame_spread=True)
    off = AgentNet(shape, 3, stem="none", hidden_size=4, frame_spread=True)
    assert not off.running_centres and "centre_mean" not in off.state_dict()
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 256, (2, 5, *shape), dtype=torch.uint8, generator=g)
    b = torch.randint(0, 100, (3, 2, *shape), dtype=torch.uint8, generator=g)
    feats = net.features(a)
    assert torch.equal(net.scaled_features(feats), off.scaled_features(feats))  # nothing observed yet: mean 0
    net.observe_frames(a)
    net.observe_frames(b)
    _, stats_a = net.frame_stats(net.features(a))
    _, stats_b = net.frame_stats(net.features(b))
    every = torch.cat([stats_a.reshape(-1, 6), stats_b.reshape(-1, 6)]).double()
    assert net.centre_frames_seen.item() == 16 and torch.allclose(net.centre_mean.double(), every.mean(0))
    assert torch.allclose(net.scaled_features(feats)[..., 48:], off.scaled_features(feats)[..., 48:] - net.centre_mean)
    assert torch.equal(net.scaled_features(feats)[..., :48], off.scaled_features(feats)[..., :48])
    off.observe_frames(a)  # a no-op without the option
    fresh = AgentNet(shape, 3, stem="none", hidden_size=4, running_centres=True, frame_spread=True)
    fresh.load_state_dict(net.state_dict())
    assert torch.equal(fresh.centre_mean, net.centre_mean) and fresh.centre_frames_seen.item() == 16
    # the learner: one applied update observes the batch's M new frames of each of its B trajectories
    torch.manual_seed(0)
    venv = make_vec_env("cue", 3, 0, obs="pixels", size=4, span=3, distractors=0.5)
    net = AgentNet(venv.observation_shape, venv.num_actions, stem="none", hidden_size=5, running_centres=True)
    batch = Actor(copy.deepcopy(net), venv, M, seed=1).rollout()
    Learner(net, _learner_cfg(), 10**6).update(batch)
    _, stats = net.frame_stats(net.features(batch["obs"][1:]))
    assert net.centre_frames_seen.item() == M * 3
    assert torch.allclose(net.centre_mean, stats.reshape(-1, 3).mean(0), atol=1e-6)
    # auto: on where frames are centred; true without centred frames is a clear error
    for stem, shp, expected in (("none", (3, 8, 8), True), ("none", (5,), False), ("impala", (3, 16, 16), False)):
        cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}"])
        assert cfg.model.running_centres == "auto"
        assert AgentNet.from_config(cfg.model, shp, 3).running_centres is expected
    with pytest.raises(ValueError, match="model.running_centres=true needs centred frames"):
        AgentNet(shape, 3, stem="none", centre_frames=False, running_centres=True)
    with pytest.raises(ValueError, match="model.running_centres must be true, false or 'auto'"):
        AgentNet(shape, 3, stem="none", running_centres="yes")
    with pytest.raises(ConfigError, match=r"model\.running_centres"):
        load_config("configs/quickstart.yaml", ["model.running_centres=sometimes"])
    old = config_to_dict(load_config("configs/quickstart.yaml"))
    del old["model"]["running_centres"]
    assert config_from_dict(upgrade_resolved(old)).model.running_centres is False


@pytest.mark.parametrize("stem, shape, expected, pixels_only", [
    ("none", (3, 8, 8), RAW_PIXEL_INPUT_SCALE, RAW_PIXEL_INPUT_SCALE), ("none", (5,), 1.0, 1.0),
    ("none", (WIDE_INPUT_ENTRIES - 1,), 1.0, 1.0), ("none", (WIDE_INPUT_ENTRIES,), RAW_PIXEL_INPUT_SCALE, 1.0),
    ("none", (984,), RAW_PIXEL_INPUT_SCALE, 1.0), ("impala", (3, 16, 16), 1.0, 1.0), ("mlp", (5,), 1.0, 1.0),
    ("mlp", (984,), 1.0, 1.0)])
def test_input_scale_auto_scales_raw_pixels_and_wide_flat_inputs(stem, shape, expected, pixels_only):
    """input_scale 'auto' (the default): raw image frames into the core (stem none) are scaled by 0.1, and so
    are flat observations of WIDE_INPUT_ENTRIES entries or more (MiniGrid's 984); stem features and narrow
    vectors are not; 'auto_pixels' (the earlier rule, which runs saved before it read 'auto' as) scales the
    image frames only; a number overrides both."""
    cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}"])
    assert cfg.model.input_scale == "auto"
    assert AgentNet.from_config(cfg.model, shape, 3).input_scale == expected
    cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}", "model.input_scale=auto_pixels"])
    assert AgentNet.from_config(cfg.model, shape, 3).input_scale == pixels_only
    cfg = load_config("configs/quickstart.yaml", [f"model.stem={stem}", "model.input_scale=0.5"])
    assert AgentNet.from_config(cfg.model, shape, 3).input_scale == 0.5
    for bad in ("autoo", "true"):
        with pytest.raises(ConfigError, match=r"model\.input_scale: expected a number or one of 'auto'"):
            load_config("configs/quickstart.yaml", [f"model.input_scale={bad}"])
    with pytest.raises(ValueError, match="input_scale must be a number > 0 or 'auto'"):
        AgentNet((5,), 3, stem="none", input_scale="big")
    # a run saved before the wide rule (no model.head_hidden) read 'auto' as the pixel-only rule
    old = config_to_dict(load_config("configs/quickstart.yaml"))
    del old["model"]["head_hidden"], old["model"]["head_input"]
    assert config_from_dict(upgrade_resolved(old)).model.input_scale == "auto_pixels"
    old["model"]["input_scale"] = 0.3  # a number stays
    assert config_from_dict(upgrade_resolved(old)).model.input_scale == 0.3
    assert config_from_dict(upgrade_resolved(config_to_dict(cfg))).model.input_scale == 0.5


def test_actor_reports_the_value_of_the_final_observation_at_time_limits():
    """gymc:CartPole-v1 with a 5-step time limit (an env that reports final observations): the trajectory's
    truncation_value is V(final observation) under the acting weights at exactly the frames whose episode the
    limit cut, equal to a forward pass over that episode's frames followed by its final frame (that step's
    reward and action as inputs, no reset); 0 elsewhere. It survives batching and validation; an env without
    final observations (the T-maze) ships none, nor does an actor without truncation_values (the default)."""
    torch.manual_seed(0)
    venv = make_vec_env("gymc:CartPole-v1", 3, 0, max_episode_steps=5)
    net = AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8, core="elstm",
                   hidden_size=5, learning="rtrl").to(torch.float64)
    finals, step = [], venv.step

    def recording(actions):
        out = step(actions)
        finals.append((out[3]["final_observation"].copy(), out[3]["truncated"].copy()))
        return out

    venv.step = recording
    actor = Actor(copy.deepcopy(net), venv, 20, seed=1, truncation_values=True)
    traj = actor.rollout()
    tv, done = traj["truncation_value"], traj["done"]
    checked = 0
    for j in range(1, 21):
        final_obs, cut = finals[j - 1]
        for b in range(3):
            if not (cut[b] and done[j, b]):
                assert tv[j, b] == 0.0
                continue
            s = j - 5  # the cut episode's first frame
            if s < 0:
                continue
            assert done[s, b] and not done[s + 1:j, b].any()
            obs = torch.cat([traj["obs"][s:j, b], torch.from_numpy(final_obs[b:b + 1])])
            inputs = {"obs": obs[:, None], "reward": traj["reward"][s:j + 1, b][:, None],
                      "action": traj["action"][s:j + 1, b][:, None],
                      "done": torch.tensor([True] + [False] * 5)[:, None]}
            with torch.no_grad():
                out, _ = net(inputs, net.initial_state(1), return_state=False)
            assert tv[j, b].item() == pytest.approx(out["baseline"][-1, 0].item(), rel=1e-5, abs=1e-6)
            assert tv[j, b] != 0.0
            checked += 1
    assert checked >= 3
    assert validate(traj, unroll_length=20, num_actions=2, state_spec=net.core.state_spec()) is None
    b = Batcher(4)
    joined = b.add(traj) + b.add(actor.rollout())
    assert joined and all(x["truncation_value"].shape == (21, 4) for x in joined)
    bad = {**traj, "truncation_value": tv[:5]}
    assert "truncation_value has shape" in validate(bad, unroll_length=20, num_actions=2,
                                                    state_spec=net.core.state_spec())
    tm, tvenv = _net()
    assert "truncation_value" not in Actor(tm, tvenv, M, seed=0, truncation_values=True).rollout()
    assert "truncation_value" not in Actor(copy.deepcopy(net), venv, 20, seed=1).rollout()  # off by default


def test_update_log_writes_a_row_per_update_and_resumes(tmp_path):
    """logger.update_log: <run_dir>/updates.csv has one row per learner update (its number, the batch's
    extremes, each parameter's gradient and step norms); a resumed run drops the rows after its checkpoint
    and goes on counting; algo=ppo says the log is not written there."""
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.logger import read_metrics
    from r2ac.runtime.local import train

    train(_cfg(tmp_path, "logger.update_log=true", "total_steps=2000"))
    header, rows = read_metrics(tmp_path / "updates.csv")
    assert {"update", "value_error_max", "grad_norm/core.w_f", "step_norm/baseline.weight"} <= set(header)
    updates = [int(float(r["update"])) for r in rows]
    ck = load_latest_checkpoint(str(tmp_path))
    assert updates == list(range(1, ck["extra"]["learner"]["updates"] + 1))
    train(_cfg(tmp_path, "logger.update_log=true", "total_steps=4000"), resume=True)
    _, rows = read_metrics(tmp_path / "updates.csv")
    updates = [int(float(r["update"])) for r in rows]
    assert updates == list(range(1, load_latest_checkpoint(str(tmp_path))["extra"]["learner"]["updates"] + 1))
    train(_cfg(tmp_path / "plain", "total_steps=1000"))
    assert not os.path.exists(tmp_path / "plain" / "updates.csv")
    with pytest.raises(ConfigError, match="logger.update_log"):
        _cfg(tmp_path, "algo=ppo", "logger.update_log=true")


def test_a_frozen_core_keeps_its_initial_weights_while_the_heads_learn():
    """model.freeze_core (the bench's 'reservoir' method): the core's weights stay as initialised and out of the
    optimizer, with learning=tbptt; the heads reading the core's output still learn; with RTRL it is refused."""
    from r2ac.runtime import build_net

    cfg = load_config("configs/quickstart.yaml", ["env.id=tmaze", "env.options={corridor_length: 4}",
                                                 "model.hidden_size=6", "model.learning=tbptt",
                                                 "model.freeze_core=true"])
    venv = make_vec_env("tmaze", 3, 0, corridor_length=4)
    torch.manual_seed(0)
    net = build_net(cfg, venv.observation_shape, venv.num_actions)
    core = {k: v.clone() for k, v in net.core.state_dict().items()}
    heads = {k: v.clone() for k, v in net.state_dict().items() if not k.startswith("core.")}
    assert core and not any(p.requires_grad for p in net.core.parameters())
    assert {id(p) for p in net.trainable_parameters()} == {id(p) for p in net.parameters()} - {
        id(p) for p in net.core.parameters()}
    actor = Actor(copy.deepcopy(net), venv, M, seed=4)
    batch = concat([actor.rollout() for _ in range(4)])
    learner = Learner(net, cfg.learner, 10**6)
    for _ in range(3):
        stats = learner.update(batch)
    assert learner.updates == 3 and stats["grad_norm"] > 0
    assert all(torch.equal(core[k], v) for k, v in net.core.state_dict().items())
    moved = [k for k, v in net.state_dict().items() if k in heads and not torch.equal(heads[k], v)]
    assert any("policy" in k for k in moved) and any("baseline" in k or "value" in k for k in moved), moved
    with pytest.raises(ConfigError, match="model.freeze_core: true .* set model.learning=tbptt"):
        load_config("configs/quickstart.yaml", ["model.freeze_core=true"])
