"""tools/odd_or_even_answers.py: answers split by the number of flashes and whether all came in the first half;
stand-in agents that keep the parity, count up to 3, say "odd" on any flash, count only the second half's flashes,
or keep nothing; real runs' checkpoints of two max_counts played through the tool into one table."""

import numpy as np
import pytest

SPAN = 24


class Counter:
    """A stand-in agent that counts the flashes (up to ``cap``; only those of the second half of the span with
    ``late``) and at the query names the count's parity; ``"any"`` says odd once it saw a flash; None guesses."""

    def __init__(self, cap, late=False, seed=0):
        self.cap, self.late = cap, late
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.zeros((n, 2), int)  # [:, 0] frames seen; [:, 1] flashes counted

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state = state.copy()
        lit = (obs == 255).all(axis=1).any(axis=(1, 2))
        counted = lit & ((2 * state[:, 0] >= SPAN) if self.late else True)
        state[:, 1] += counted
        state[:, 0] += 1
        if self.cap is None:
            return self.rng.integers(2, size=len(obs)), state
        if self.cap == "any":
            return (state[:, 1] > 0).astype(int), state
        return np.minimum(state[:, 1], self.cap) % 2, state


@pytest.mark.parametrize("cap, counts, early", [
    (99, (1,) * 6, 1), (3, (1, 1, 1, 0, 1, 0), None), ("any", (1, 0) * 3, 2 / 3), (None, (0.5,) * 6, 0.5)])
def test_what_is_kept_is_told_by_the_counts_answered(load_tool, cap, counts, early):
    tool = load_tool("odd_or_even_answers")
    right, seen = tool.answers_by_group(Counter(cap), {"span": SPAN}, episodes=3000, num_envs=100, seed=3)
    assert seen.sum() == 3000 and (seen.reshape(6, 2).sum(axis=1) > 400).all()  # every count about 1/6
    row = tool.row_for("counter", 0, SPAN, right, seen)
    assert np.allclose([row[str(k)] for k in range(1, 7)], counts, atol=0.07), row
    assert row["all"] == pytest.approx(np.mean(counts), abs=0.04)
    assert row["odd"] == pytest.approx(np.mean(counts[0::2]), abs=0.05)
    assert row["even"] == pytest.approx(np.mean(counts[1::2]), abs=0.05)
    if early is not None:
        assert row["all in the first half"] == pytest.approx(early, abs=0.1)


def test_an_agent_that_misses_the_first_half_is_at_chance_where_every_flash_came_there(load_tool):
    tool = load_tool("odd_or_even_answers")
    right, seen = tool.answers_by_group(Counter(99, late=True), {"span": SPAN}, episodes=2000, seed=5)
    row = tool.row_for("late", 0, SPAN, right, seen)
    assert row["1"] == pytest.approx(0.5, abs=0.08)  # one flash: in the second half or missed, even odds
    # it counts nothing there and says "even": right on the even counts, a third of such episodes (a count of k
    # has all k flashes in the first half about 2^-k of the time)
    assert row["all in the first half"] == pytest.approx(1 / 3, abs=0.08)


def test_groups_of_episodes_and_bad_counts(load_tool):
    tool = load_tool("odd_or_even_answers")
    assert tool.group_of({3}, 10) == 1 and tool.group_of({5}, 10) == 0 and tool.group_of({4}, 10) == 1
    assert tool.group_of({0, 1, 9}, 10) == 4 and tool.group_of({0, 1, 2, 3, 4}, 10) == 9
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_group(Counter(99), {"span": SPAN}, episodes=episodes, num_envs=num_envs)


def test_trained_runs_of_two_max_counts_play_through_the_tool_into_one_table(load_tool, tiny_run, tmp_path):
    import csv
    import shutil

    task = "gym:examples.odd_or_even:OddOrEven"
    two = tmp_path / "two"
    shutil.move(tiny_run(task, "{span: 8, max_count: 2}"), two)
    six = tiny_run(task, "{span: 8}")
    out = tmp_path / "played.csv"
    assert load_tool("odd_or_even_answers").main([str(two), str(six), "--episodes", "60", "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["span"] for r in rows] == ["8", "8"] and [r["episodes"] for r in rows] == ["60", "60"]
    assert all(0.0 <= float(r[k]) <= 1.0 for r in rows for k in ("all", "odd", "even", "1", "2"))
    assert [rows[0][str(k)] for k in range(3, 7)] == ["nan"] * 4  # counts a max_count of 2 never plays
    assert all(0.0 <= float(rows[1][str(k)]) <= 1.0 for k in range(3, 7))


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/odd_or_even.py's OddOrEven"):
        load_tool("odd_or_even_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])


def test_the_probe_reads_a_kept_count_and_tells_it_from_a_kept_parity(load_tool):
    tool = load_tool("odd_or_even_answers")
    record = {}
    tool.answers_by_group(Counter(99), {"span": SPAN}, episodes=1200, seed=4, record=record)
    assert record["state"].shape == (1200, 2) and record["group"].shape == record["right"].shape == (1200,)
    cols = tool.probe_columns(record, 6)
    # the stand-in's state holds the count itself: read right on every count; its parity is not linear in it
    assert all(cols[f"count read {k}"] > 0.95 for k in range(1, 7)), cols
    assert cols["parity read"] < 0.8

    class ParityKeeper(Counter):  # keeps only the parity: the probe reads it, and the count beyond it not
        def act(self, obs, state, reward=None, done=None):
            action, state = super().act(obs, state, reward, done)
            state[:, 1] %= 2
            return action, state

    record = {}
    tool.answers_by_group(ParityKeeper(99), {"span": SPAN}, episodes=1200, seed=4, record=record)
    cols = tool.probe_columns(record, 6)
    assert cols["parity read"] > 0.99
    assert np.mean([cols[f"count read {k}"] for k in range(1, 7)]) < 0.5


def test_trained_runs_probed_through_the_tool(probed_row):
    row = probed_row("odd_or_even_answers", "gym:examples.odd_or_even:OddOrEven", "{span: 8}", too_few=10)
    assert all(0.0 <= float(row[f"{what} read {k}"]) <= 1.0 for what in ("count", "parity") for k in range(1, 7))
    assert 0.0 <= float(row["parity read"]) <= 1.0
