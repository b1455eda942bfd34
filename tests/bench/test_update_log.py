"""tools/update_log.py: spikes, events and drifts of the per-update log, on a synthetic log and a real run."""

import csv

import numpy as np
import pytest


def _write_log(path, grad_norm, mean_value):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "wall_time", "update", "grad_norm", "mean_value", "value_min", "value_max",
                    "value_error_max", "grad_norm/core.b_z", "grad_norm/baseline.bias"])
        for i, (g, v) in enumerate(zip(grad_norm, mean_value)):
            w.writerow([320 * (i + 1), 0.0, i + 1, g, v, v - 0.5, v + 0.5, 0.1, 0.6 * g, 0.8 * g])


def test_spike_events_merge_close_spikes_and_wait_for_a_window(load_tool):
    tool = load_tool("update_log")
    g = np.ones(40)
    g[[2, 15, 17, 30]] = 100.0  # 2 falls before the window is full; 15 and 17 are one event; 30 another
    assert tool.spike_events(g, 20.0, 5, 3) == [[15, 17], [30]]
    assert tool.spike_events(g, 200.0, 5, 3) == []


def test_drift_start_follows_the_run_of_same_signed_moves(load_tool):
    tool = load_tool("update_log")
    v = np.array([0.0, 1.0, 0.5, 0.4, 0.2, -1.0, -3.0])
    assert tool.drift_start(v, 6) == 1  # falling from index 1 on
    assert tool.drift_start(v, 1) == 0 and tool.drift_start(v, 0) == 0


def test_lead_correlation_tells_a_pulled_back_level_from_a_run_away(load_tool):
    tool = load_tool("update_log")
    rng = np.random.default_rng(0)
    level = np.cumsum(rng.normal(size=50))
    restoring = 0.3 * (1.0 - level)          # targets at 1: the error shrinks as the level nears them
    running = 0.05 * (level - level[0])      # targets that move away faster than the level follows
    assert tool.lead_correlation(restoring, level, 0, 50) == pytest.approx(-1.0)
    assert tool.lead_correlation(running, level, 10, 50) == pytest.approx(1.0)
    assert abs(tool.lead_correlation(rng.normal(size=50), level, 0, 50)) < 0.5
    assert np.isnan(tool.lead_correlation(running, level, 0, 2))
    assert np.isnan(tool.lead_correlation(running, level, -9, 2))
    assert np.isnan(tool.lead_correlation(np.zeros(50), level, 0, 50))


def test_events_table_and_window_from_a_log(tmp_path, capsys, load_tool):
    tool = load_tool("update_log")
    n = 300
    g = np.full(n, 0.2)
    v = np.full(n, 0.5)
    v[200:230] = 0.5 - 0.1 * np.arange(1, 31)   # a drift of 30 updates ...
    g[230:235] = [10.0, 50.0, 0.2, 0.2, 40.0]      # ... then spikes 230, 231 and 234 (one event)
    run = tmp_path / "run"
    run.mkdir()
    _write_log(run / "updates.csv", g, v)
    out = tmp_path / "events.csv"
    assert tool.main([str(run), "--window", "100", "--gap", "10", "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1
    r = rows[0]
    assert (r["update"], r["last_update"], r["spikes"], r["top_param"]) == ("231", "235", "3", "baseline.bias")
    assert float(r["peak"]) == 50.0 and float(r["ratio"]) == pytest.approx(50.0)
    # the first update of the drift is index 199 (update 200): its step moved the next batch's values down
    assert (r["drift_from"], r["drift_updates"]) == ("200", "31")
    assert "| run |" in capsys.readouterr().out
    png = tmp_path / "w.png"
    assert tool.main([str(run), "--updates", "228:233", "--columns", "mean_value,grad_norm/core.b_z",
                      "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "grad_norm/core.b_z" in text and len(text.strip().splitlines()) == 2 + 6 + 1 and png.stat().st_size > 0
    with pytest.raises(KeyError, match="no column"):
        tool.main([str(run), "--updates", "1:3", "--columns", "nothing"])
    with pytest.raises(ValueError, match="no update in"):
        tool.main([str(run), "--updates", "900:901"])


def test_a_run_without_the_log_names_the_setting(tmp_path, load_tool):
    tool = load_tool("update_log")
    with pytest.raises(FileNotFoundError, match="logger.update_log=true"):
        tool.read_updates(str(tmp_path))


def test_reads_a_real_runs_log(tmp_path, capsys, load_tool, tiny_run):
    tool = load_tool("update_log")
    run = tiny_run("cue", "{span: 3, obs: vector}", "logger.update_log=true")
    u = tool.read_updates(str(run))
    capsys.readouterr()  # the run's own output
    assert u["update"][0] == 1 and np.all(np.diff(u["update"]) == 1) and "grad_norm/core.w_f" in u
    last = int(u["update"][-1])
    assert tool.main([str(run), "--updates", f"1:{last}"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2 + last
    assert tool.main([str(run), "--window", "1", "--factor", "1.01"]) == 0


def test_levels_give_each_runs_value_ranges_and_the_gap_to_its_target(load_tool, tmp_path, capsys):
    tool = load_tool("update_log")
    plain, target = tmp_path / "plain", tmp_path / "target"
    plain.mkdir()
    target.mkdir()
    _write_log(plain / "updates.csv", np.ones(6), [0.5, 0.7, -61.0, 0.2, 38.0, 0.9])
    with open(target / "updates.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "update", "mean_value", "value_min", "value_max", "target_mean_value"])
        for i, (v, t) in enumerate(zip([0.1, 0.4, 0.6], [0.1, 0.3, 0.65])):
            w.writerow([320 * (i + 1), i + 1, v, v - 0.2, v + 0.4, t])
    lv = tool.value_levels(tool.read_updates(str(plain)))
    assert (lv["updates"], lv["mean_value_min"], lv["mean_value_max"]) == (6, -61.0, 38.0)
    assert (lv["value_min"], lv["value_max"]) == (-61.5, 38.5) and np.isnan(lv["target_gap_median"])
    lt = tool.value_levels(tool.read_updates(str(target)))
    assert lt["target_gap_median"] == pytest.approx(0.05) and lt["target_gap_max"] == pytest.approx(0.1)
    out = tmp_path / "levels.csv"
    assert tool.main([str(plain), str(target), "--levels", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "target_gap_median" in printed and "-61" in printed
    assert len(list(csv.DictReader(open(out)))) == 2
