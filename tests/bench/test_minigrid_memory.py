"""tools/minigrid_memory.py: its accounting of cue sightings and picks, on real MiniGrid Memory envs with
scripted walkers that know the answer."""

import importlib.util
import os

import numpy as np
import pytest

pytest.importorskip("minigrid")

from r2ac.envs import make_vec_env  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "minigrid_memory", os.path.join(os.path.dirname(__file__), "..", "..", "tools", "minigrid_memory.py"))
mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mm)

LEFT, RIGHT, FORWARD = 0, 1, 2


def walker(venv, to_success: bool, look_first: bool):
    """Actions that walk each env's agent to the matching object (or the other one), turning to face the
    start room's cue first where ``look_first``."""
    looked = np.zeros(venv.num_envs, dtype=bool)

    def act(obs, reward, done):
        if done is not None:
            looked[np.asarray(done)] = False
        actions = np.empty(venv.num_envs, dtype=np.int64)
        for b, env in enumerate(venv.envs):
            g = env.unwrapped
            x, y = g.agent_pos
            tx, ty = g.success_pos if to_success else g.failure_pos
            if look_first and not looked[b]:
                if g.agent_dir != 2:  # face the start room (west) once
                    actions[b] = RIGHT
                    continue
                looked[b] = True
            need = 0 if x < tx else (3 if ty < y else 1)  # east along the corridor, then north or south
            actions[b] = FORWARD if g.agent_dir == need else RIGHT
        return actions

    return act


@pytest.mark.parametrize("to_success", [True, False])
def test_walkers_that_know_the_answer(to_success):
    venv = make_vec_env("minigrid:MemoryS7", 4, seed=3)
    row = mm.play_memory(venv, walker(venv, to_success, look_first=False), 40)
    assert row["episodes"] == 40 and row["reached_end"] == 1.0
    assert row["right"] == (1.0 if to_success else 0.0)
    assert row["mean_length"] < 12
    looker = mm.play_memory(venv, walker(venv, to_success, look_first=True), 40)
    assert looker["cue_seen"] == 1.0 and looker["right_if_seen"] == (1.0 if to_success else 0.0)
    assert np.isnan(looker["right_if_not_seen"])  # no episode without a look: no share
    assert row["cue_seen"] < looker["cue_seen"]  # facing east from the start, the cue is behind
    # a start beside the cue shows it in the first view; the walkers also see it turning through west to go north
    assert 0.0 < row["cue_at_start"] <= row["cue_seen"] and 0.0 < looker["cue_at_start"] < 1.0
    venv.close()


def test_random_actions_and_a_task_that_is_not_memory():
    venv = make_vec_env("minigrid:MemoryS7", 8, seed=0)
    rng = np.random.default_rng(0)
    row = mm.play_memory(venv, lambda obs, reward, done: rng.integers(0, 7, 8), 30)
    assert 0.0 <= row["cue_seen"] <= 1.0 and 0.0 <= row["reached_end"] <= 1.0
    venv.close()
    other = make_vec_env("minigrid:Empty-5x5", 1, seed=0)
    with pytest.raises(SystemExit, match="not a MiniGrid Memory task"):
        mm.cue_position(other.envs[0])
    other.close()


def test_no_episodes_is_refused_before_any_run_is_read():
    with pytest.raises(SystemExit, match="minigrid_memory: --episodes must be >= 1"):
        mm.main(["no-such-run", "--episodes", "0"])


def test_probe_reads_a_class_that_the_features_hold_and_not_one_they_do_not():
    rng = np.random.default_rng(0)
    labels = rng.random(200) < 0.5
    noise = rng.normal(size=(200, 8))
    held = noise.copy()
    held[:, 3] += np.where(labels, 2.0, -2.0)
    assert mm.probe_accuracy(held, labels) > 0.95
    assert 0.35 < mm.probe_accuracy(noise, labels) < 0.65
    assert np.isnan(mm.probe_accuracy(held[:mm.PROBE_MIN - 1], labels[:mm.PROBE_MIN - 1]))
    assert np.isnan(mm.probe_accuracy(held, np.ones(200, dtype=bool)))  # one class: nothing to tell apart


def test_probe_columns_on_a_walker_that_remembers_the_cue():
    """A looking walker whose 'memory' latches the cue's kind once it has seen it: the probe reads the cue
    where it was seen; a memory of noise holds nothing; without a memory the columns are NaN."""
    venv = make_vec_env("minigrid:MemoryS7", 4, seed=5)
    walk = walker(venv, to_success=True, look_first=True)
    rng = np.random.default_rng(1)
    latch = np.full(4, 0.5)

    def act(obs, reward, done):
        if done is not None:
            latch[np.asarray(done)] = 0.5  # a new episode: nothing remembered
        return walk(obs, reward, done)

    def latched():
        for b, env in enumerate(venv.envs):
            if env.unwrapped.agent_sees(*mm.cue_position(env)):
                latch[b] = float(mm.cue_is_key(env))
        return np.stack([latch, rng.normal(size=4)], 1)

    row = mm.play_memory(venv, act, 60, latched)
    assert row["cue_seen"] == 1.0 and row["cue_in_state_if_seen"] == 1.0
    assert np.isnan(row["cue_in_state_if_not_seen"])  # no episode without a look
    noise = mm.play_memory(venv, act, 80, lambda: rng.normal(size=(4, 3)))
    assert 0.25 < noise["cue_in_state_if_seen"] < 0.75
    assert np.isnan(mm.play_memory(venv, act, 8)["cue_in_state_if_seen"])
    venv.close()


def test_gate_drive_is_linear_in_the_input_scale_and_nan_without_elstm_gates():
    import torch

    from r2ac.agent.nets import AgentNet

    venv = make_vec_env("minigrid:MemoryS7", 4, seed=0)
    frames = np.stack([venv.reset() for _ in range(3)]).reshape(-1, *venv.observation_shape)
    drives = []
    for scale in (1.0, 0.1):
        torch.manual_seed(0)
        net = AgentNet(venv.observation_shape, venv.num_actions, stem="none", core="elstm", hidden_size=8,
                       input_scale=scale)
        drives.append(mm.gate_drive(net, frames))
    for key in ("keep_gate_drive", "output_gate_drive"):
        assert drives[0][key] > 0 and abs(drives[1][key] - 0.1 * drives[0][key]) < 1e-6 * drives[0][key] + 1e-9
    lstm = AgentNet(venv.observation_shape, venv.num_actions, stem="none", core="lstm", hidden_size=8,
                    learning="tbptt")
    assert np.isnan(mm.gate_drive(lstm, frames)["keep_gate_drive"])
    venv.close()
