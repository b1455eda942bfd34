"""Shared by the benchmark tests: loading a script of tools/ (not a package) as a module, tiny real runs, and
the tools that play them."""

import importlib.util
import os

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")


@pytest.fixture
def load_tool():
    """``load_tool("gate_drive")``: tools/gate_drive.py as a fresh module."""
    def load(name):
        spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture
def tiny_run(tmp_path):
    """``tiny_run("cue", "{span: 3}", *overrides)``: a real 400-step quickstart run on that task (8 units,
    4 envs) under ``tmp_path / "run"``; returns its directory."""
    from r2ac.cli import main

    def train(env_id, options, *overrides):
        run = tmp_path / "run"
        assert main(["train", "quickstart", f"run_dir={run}", f"env.id={env_id}", f"env.options={options}",
                     "env.num_envs=4", "learner.batch_size=2", "model.hidden_size=8", "total_steps=400",
                     "logger.progress_bar=false", "logger.log_interval_s=0.2", "checkpoint.interval_s=.inf",
                     *overrides]) == 0
        return run

    return train


@pytest.fixture
def played_row(load_tool, tiny_run, tmp_path):
    """``played_row("same_place_answers", "gym:examples.same_place:SamePlace", episodes[, options])``: that tool
    of tools/ run on a tiny run of that task (``options``, span 3 by default) with ``--episodes`` and ``--out``;
    returns the first row of its CSV (the tools that play trained runs)."""
    import csv

    def play(tool, env_id, episodes, options="{span: 3}"):
        out = tmp_path / "played.csv"
        run = tiny_run(env_id, options)
        assert load_tool(tool).main([str(run), "--episodes", str(episodes), "--out", str(out)]) == 0
        with open(out) as f:
            return next(csv.DictReader(f))

    return play


@pytest.fixture
def probed_row(load_tool, tiny_run, tmp_path):
    """``probed_row("which_turn_answers", "gym:examples.which_turn:WhichTurn", "{span: 6}", too_few=12)``: that
    tool run with ``--probe``, 120 episodes and ``--out`` on a tiny run of that task; asserts it refuses ``too_few``
    episodes with ``--probe`` by name (a probe needs at least 24); returns the first row of its CSV."""
    import csv

    def play(tool, env_id, options, too_few):
        tool, out, run = load_tool(tool), tmp_path / "probed.csv", tiny_run(env_id, options)
        assert tool.main([str(run), "--episodes", "120", "--probe", "--out", str(out)]) == 0
        with open(out) as f:
            row = next(csv.DictReader(f))
        with pytest.raises(ValueError, match="--probe needs at least 24 episodes"):
            tool.main([str(run), "--episodes", str(too_few), "--probe"])
        return row

    return play
