"""``learner.sensitivities``: where a trajectory's starting RTRL sensitivities come from.

'actor' (the default) trains on the sensitivities the actor shipped, computed under the weights it acted
with; 'learner' replaces them with the ones the learner's own pass over the same env's previous trajectory
ended with, under the weights of that update. With no policy lag the two are the same numbers (float64
test below); with lag they differ, and the learner's are exactly the closed-form transport under the
newer weights.
"""

import copy

import pytest
import torch

from r2ac.agent.actor import Actor
from r2ac.config import load_config
from r2ac.runtime.common import TrainingSession, make_env

M = 5


def _cfg(tmp_path, mode, *extra):
    return load_config("configs/quickstart.yaml", [
        f"run_dir={tmp_path / mode}", "total_steps=100000", "env.num_envs=3", "learner.batch_size=3",
        f"learner.unroll_length={M}", "env.options={corridor_length: 7}", "model.hidden_size=6",
        f"learner.sensitivities={mode}", "logger.tensorboard=false", "logger.progress_bar=false",
        "checkpoint.interval_s=.inf", *extra])


def _session(cfg):
    venv = make_env(cfg, 0)
    torch.manual_seed(0)
    session = TrainingSession(cfg, None, venv.observation_shape, venv.num_actions, progress_bar=False)
    return session, venv


def _record_batches(session):
    """Wrap the learner's update to keep a copy of each batch's initial state."""
    seen, update = [], session.learner.update

    def recording(batch):
        seen.append({k: v.cpu().clone() for k, v in batch["initial_state"].items()})  # on a GPU too
        return update(batch)

    session.learner.update = recording
    return seen


def test_without_lag_learner_sensitivities_are_the_actors(tmp_path, float64):
    """float64, the local runtime's order (act, update, new weights to the actor): both modes train the
    same weights, and 'learner' did use its own sensitivities for every continuing column."""
    weights, fracs, stale = {}, [], []
    for mode in ("actor", "learner"):
        cfg = _cfg(tmp_path, mode)
        session, venv = _session(cfg)
        actor = Actor(copy.deepcopy(session.net).cpu(), venv, M, seed=1)
        for _ in range(12):
            assert session.add_trajectory(actor.rollout(), M * 3, source="actor 0")
            actor.set_weights(session.weights(), session.learner.updates)
            if mode == "learner" and "learner_sensitivities_frac" in session.stats:
                fracs.append(session.stats["learner_sensitivities_frac"])
                stale.append(session.stats["sensitivity_staleness"])
        weights[mode] = session.weights()
        session.close()
    assert fracs and fracs[0] == 1.0 and all(f == 1.0 for f in fracs)
    assert stale and max(stale) < 1e-9  # no lag: the shipped sensitivities were the learner's
    for k, v in weights["actor"].items():
        assert torch.allclose(v, weights["learner"][k], rtol=1e-9, atol=1e-12), k


def test_with_lag_the_learner_transports_under_its_newer_weights(tmp_path, float64):
    """An actor that keeps its first weights for three trajectories (policy lag 0, 1, 2): the third
    trajectory trains on sensitivities moved across the second under the weights after one update,
    computed here independently, and those differ from the stale ones the actor shipped."""
    cfg = _cfg(tmp_path, "learner", "learner.learning_rate=0.05")
    session, venv = _session(cfg)
    seen = _record_batches(session)
    actor = Actor(copy.deepcopy(session.net).cpu(), venv, M, seed=2)
    trajs = [actor.rollout() for _ in range(3)]
    assert not trajs[2]["done"][0].all()  # some columns continue the second trajectory
    after_one = None
    for i, t in enumerate(trajs):
        assert session.add_trajectory({**t, "initial_state": dict(t["initial_state"])}, M * 3, source="actor 0")
        if i == 0:
            after_one = copy.deepcopy(session.net).cpu()
    net1 = after_one
    t = trajs[1]
    inputs = {k: t[k][:M] for k in ("obs", "reward", "action", "done")}
    with torch.no_grad():
        _, end = net1(inputs, t["initial_state"])
    keys = session.net.core.sensitivity_keys
    cont = ~trajs[2]["done"][0]
    for k in keys:
        used, shipped = seen[2][k][cont], trajs[2]["initial_state"][k][cont]
        assert torch.allclose(used, end[k][cont], rtol=1e-10, atol=1e-12), k
        assert not torch.allclose(used, shipped, rtol=1e-6, atol=1e-9), k  # staleness is measurable here
    num = sum(float((seen[2][k][cont] - trajs[2]["initial_state"][k][cont]).pow(2).sum()) for k in keys)
    den = sum(float(trajs[2]["initial_state"][k][cont].pow(2).sum()) for k in keys)
    assert session.stats["sensitivity_staleness"] == pytest.approx((num / den) ** 0.5, rel=1e-9)
    assert session.stats["sensitivity_staleness"] > 0
    for k in set(seen[2]) - set(keys):  # the hidden state stays the actor's
        assert torch.equal(seen[2][k], trajs[2]["initial_state"][k])
    session.close()


def test_learner_sensitivities_fall_back_to_the_shipped_ones(tmp_path):
    """A trajectory whose predecessor was not trained on yet (same batch), one from an unknown actor
    numbering, and one without trajectory numbers all train on the actor's sensitivities."""
    cfg = _cfg(tmp_path, "learner", "learner.batch_size=6")
    session, venv = _session(cfg)
    seen = _record_batches(session)
    actor = Actor(copy.deepcopy(session.net).cpu(), venv, M, seed=3)
    a, b = actor.rollout(), actor.rollout()
    session.add_trajectory(a, M * 3, source="actor 0")
    session.add_trajectory(b, M * 3, source="actor 0")  # a and b in one batch: b cannot use a's pass
    assert len(seen) == 1
    for k, v in b["initial_state"].items():
        assert torch.equal(seen[0][k][3:], v)
    c = actor.rollout()
    c["segment"] = c["segment"] + 5  # not the successor of b
    d = actor.rollout()
    del d["segment"]
    session.add_trajectory(c, M * 3, source="actor 0")
    session.add_trajectory(d, M * 3, source="actor 0")
    for k, v in c["initial_state"].items():
        assert torch.equal(seen[1][k][:3], v)
    session.close()


def test_learner_sensitivities_is_checked_and_does_nothing_without_rtrl(tmp_path):
    with pytest.raises(Exception, match="sensitivities"):
        load_config("configs/quickstart.yaml", ["learner.sensitivities=critic"])
    cfg = _cfg(tmp_path, "learner", "model.learning=tbptt")
    session, venv = _session(cfg)
    actor = Actor(copy.deepcopy(session.net).cpu(), venv, M, seed=4)
    for _ in range(3):
        assert session.add_trajectory(actor.rollout(), M * 3, source="actor 0")
    assert "learner_sensitivities_frac" not in session.stats and session.learner.end_sensitivities is None
    session.close()


def test_sensitivity_rms_comes_from_validating_the_shipped_trajectories(tmp_path, float64):
    """The session's sensitivity_rms is the learner's own measure on the batch (gradient_diagnostics), taken
    from the square sums the finite check computes: the learner makes no pass of its own for it."""
    from r2ac.agent.learner import gradient_diagnostics

    session, venv = _session(_cfg(tmp_path, "actor"))
    assert session.learner.sensitivity_rms is False
    seen = _record_batches(session)
    actor = Actor(copy.deepcopy(session.net).cpu(), venv, M, seed=3)
    keys = session.net.core.sensitivity_keys
    for _ in range(4):
        assert session.add_trajectory(actor.rollout(), M * 3, source="actor 0")
        actor.set_weights(session.weights(), session.learner.updates)
        n = sum(seen[-1][k].numel() for k in keys)
        want = (sum(float(seen[-1][k].pow(2).sum()) for k in keys) / n) ** 0.5
        corrections = {p: torch.ones_like(p) for p in session.learner.recurrent}  # any: only the rms is read
        ref = gradient_diagnostics(session.learner.recurrent, corrections, seen[-1], keys)["sensitivity_rms"]
        assert session.stats["sensitivity_rms"] == pytest.approx(want, rel=1e-12) == pytest.approx(ref, rel=1e-12)
    assert session.stats["sensitivity_rms"] > 0
    session.close()
