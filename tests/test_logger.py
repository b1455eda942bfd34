import csv
import glob
import io
import os
import struct
import time
import sys

import pytest

from r2ac.logger import (
    Progress,
    RunLogger,
    plot_learning_curve,
    progress,
    read_metrics,
    resolve_wandb_mode,
)

NO_BACKENDS = {"tensorboard": False, "wandb": False}


def rows_of(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


# ------------------------------------------------------------------ csv


def test_csv_header_grows_and_file_stays_valid(tmp_path):
    with RunLogger(tmp_path, NO_BACKENDS, {}, "r") as lg:
        lg.log(10, {"loss": 1.0})
        lg.log(20, {"loss": 0.5, "episode_return": 2.0})
        lg.log(30, {"episode_return": float("nan")})
    rows = rows_of(tmp_path / "metrics.csv")
    assert rows[0] == ["step", "wall_time", "loss", "episode_return"]
    assert [r[0] for r in rows[1:]] == ["10", "20", "30"]
    assert rows[1][2:] == ["1.0", ""] and rows[2][2:] == ["0.5", "2.0"]
    assert rows[3][2:] == ["", "nan"]
    assert all(len(r) == 4 for r in rows)
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []  # no temp files


def test_bad_metrics_warn_but_do_not_crash(tmp_path):
    import torch
    with RunLogger(tmp_path, NO_BACKENDS, {}, "r") as lg:
        with pytest.warns(RuntimeWarning, match="non-numeric"):
            lg.log(1, {"ok": torch.tensor(2.5), "bad": "text", "flag": True})
        with pytest.warns(RuntimeWarning, match="reserved"):
            lg.log(2, {"step": 5})
    header, rows = read_metrics(tmp_path / "metrics.csv")
    assert header == ["step", "wall_time", "ok", "flag"]
    assert rows[0]["ok"] == "2.5" and rows[0]["flag"] == "1.0"
    with pytest.raises(RuntimeError, match="after close"):
        lg.log(3, {"ok": 1})


def test_resume_drops_rows_past_checkpoint_and_appends(tmp_path):
    with RunLogger(tmp_path, NO_BACKENDS, {}, "r") as lg:
        for s in (100, 200, 300, 400):
            lg.log(s, {"loss": s / 100})
    # simulate a crash mid-row
    with open(tmp_path / "metrics.csv", "a") as fh:
        fh.write("500,17")
    with RunLogger(tmp_path, NO_BACKENDS, {}, "r", resume_step=200) as lg:
        lg.log(300, {"loss": 30.0, "new": 1.0})
    rows = rows_of(tmp_path / "metrics.csv")
    assert rows[0] == ["step", "wall_time", "loss", "new"]
    assert [(r[0], r[2]) for r in rows[1:]] == [("100", "1.0"), ("200", "2.0"), ("300", "30.0")]


def test_accepts_the_typed_logger_section(tmp_path):
    from r2ac.config import load_config

    cfg = load_config(None, ["logger.tensorboard=false"])
    with RunLogger(tmp_path, cfg.logger, {}, cfg.name) as lg:
        lg.log(1, {"a": 1.0})
    assert not (tmp_path / "tensorboard").exists()
    assert (tmp_path / "metrics.csv").exists()


def test_fresh_run_moves_old_metrics_aside(tmp_path):
    with RunLogger(tmp_path, NO_BACKENDS, {}, "r") as lg:
        lg.log(1, {"a": 1})
    with pytest.warns(RuntimeWarning, match="moved it to"):
        lg = RunLogger(tmp_path, NO_BACKENDS, {}, "r")
    lg.close()
    assert rows_of(tmp_path / "metrics.1.csv")[1][0] == "1"
    assert rows_of(tmp_path / "metrics.csv") == [["step", "wall_time"]]


# ------------------------------------------------------------------ tensorboard


def test_tensorboard_events_written(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with RunLogger(tmp_path, {"tensorboard": True, "wandb": False}, {}, "r") as lg:
        for s in range(3):
            lg.log(s * 10, {"episode_return": float(s)})
    files = glob.glob(str(tmp_path / "tensorboard" / "events.out.tfevents.*"))
    assert files
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    ev = acc.Scalars("train/episode_return")
    assert [(e.step, e.value) for e in ev] == [(0, 0.0), (10, 1.0), (20, 2.0)]
    # resume from step 10: the step-20 point is purged, the new one replaces it
    with RunLogger(tmp_path, {"tensorboard": True, "wandb": False}, {}, "r", resume_step=10) as lg:
        lg.log(20, {"episode_return": 7.0})
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    ev = acc.Scalars("train/episode_return")
    assert [(e.step, e.value) for e in ev] == [(0, 0.0), (10, 1.0), (20, 7.0)]


# ------------------------------------------------------------------ wandb


def wandb_history(run_file, wait_s: float = 20.0):
    """Decode history rows from a .wandb transaction log (see ``wandb_records``)."""
    return [{i.key or "/".join(i.nested_key): i.value_json for i in rec.history.item}
            for rec in wandb_records(run_file, "history", wait_s)]


def wandb_records(run_file, record_type: str, wait_s: float = 20.0):
    """Decode the records of one kind (``history``, ``run``, ...) from a .wandb transaction log (leveldb-log
    framing + protobuf).

    wandb-core writes the log from its own process and can finish writing it a moment after
    ``run.finish()`` has returned (seen under load: an empty log right after close, complete 1-3 s
    later), so this waits up to ``wait_s`` for the file to stop being empty of records."""
    from wandb.proto import wandb_internal_pb2 as pb

    deadline = time.monotonic() + wait_s
    size = -1
    while time.monotonic() < deadline:  # until the log has records and stopped growing for 0.5 s
        now = os.path.getsize(run_file)
        if now > 7 and now == size:
            break
        size = now
        time.sleep(0.5)
    data = open(run_file, "rb").read()
    assert data[:4] == b":W&B"
    pos, block, buf, out = 7, 32768, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pos += 7
        if kind == 0 and n == 0:
            break
        chunk, pos = data[pos:pos + n], pos + n
        if kind in (1, 2):
            buf = chunk
        else:
            buf += chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            if rec.WhichOneof("record_type") == record_type:
                out.append(rec)
    return out


def test_wandb_offline_run_records_history(wandb_env, tmp_path):
    run = tmp_path / "run"
    section = {"tensorboard": False, "wandb": True, "wandb_project": "p", "wandb_group": "g",
               "wandb_tags": ["t1"], "wandb_mode": "auto"}
    lg = RunLogger(run, section, {"learner": {"batch_size": 4}}, "my-run")
    assert lg.wandb_mode == "offline" and lg.wandb_run is not None
    for s in (10, 20):
        lg.log(s, {"episode_return": s / 10, "total_loss": 0.5, "steps_per_s": 100.0})
    lg.close()
    run_id = (run / "wandb_run_id").read_text().strip()
    dirs = glob.glob(str(run / "wandb" / f"offline-run-*-{run_id}"))
    assert len(dirs) == 1
    hist = wandb_history(os.path.join(dirs[0], f"run-{run_id}.wandb"))
    # W&B gets the dashboard namespaces (as TensorBoard does); metrics.csv keeps the plain names
    assert [(h["agent_step"], h["env_frames"], h["train/episode_return"], h["system/env_frames"]) for h in hist] == [
        ("10", "10", "1", "10"), ("20", "20", "2", "20")]
    assert all(h["learner/total_loss"] == "0.5" and h["system/steps_per_s"] == "100" for h in hist)
    assert not any(k in h for h in hist for k in ("episode_return", "total_loss", "steps_per_s"))
    assert read_metrics(run / "metrics.csv")[0] == ["step", "wall_time", "episode_return", "total_loss", "steps_per_s"]

    # resume reuses the run id; a fresh run gets a new one
    lg = RunLogger(run, section, {}, "my-run", resume_step=20)
    assert (run / "wandb_run_id").read_text().strip() == run_id
    lg.close()
    with pytest.warns(RuntimeWarning, match="moved it to"):
        lg = RunLogger(run, section, {}, "my-run")
    assert (run / "wandb_run_id").read_text().strip() != run_id
    lg.close()


def test_wandb_failure_never_breaks_training(wandb_env, tmp_path, monkeypatch):
    import wandb

    def broken_init(*a, **k):
        raise RuntimeError("no network")

    monkeypatch.setattr(wandb, "init", broken_init)
    with pytest.warns(RuntimeWarning, match="W&B init .* failed: RuntimeError: no network"):
        lg = RunLogger(tmp_path, {"tensorboard": False, "wandb": True, "wandb_mode": "offline"},
                       {}, "r")
    assert lg.wandb_run is None
    lg.log(1, {"x": 1.0})
    lg.close()
    assert read_metrics(tmp_path / "metrics.csv")[1][0]["x"] == "1.0"


def test_wandb_online_failure_falls_back_to_offline(wandb_env, tmp_path, monkeypatch):
    import wandb

    modes = []

    class FakeRun:
        def define_metric(self, *a, **k):
            pass

        def log(self, d):
            raise ConnectionError("lost")

        def finish(self):
            pass

    def fake_init(mode, **k):
        modes.append(mode)
        if mode == "online":
            raise TimeoutError("init timed out")
        return FakeRun()

    monkeypatch.setattr(wandb, "init", fake_init)
    with pytest.warns(RuntimeWarning, match="retrying offline"):
        lg = RunLogger(tmp_path, {"tensorboard": False, "wandb": True, "wandb_mode": "online"},
                       {}, "r")
    assert modes == ["online", "offline"] and lg.wandb_mode == "offline"
    with pytest.warns(RuntimeWarning, match="W&B logging failed"):
        lg.log(1, {"x": 1.0})
    assert lg.wandb_run is None
    lg.log(2, {"x": 2.0})  # keeps going without W&B
    lg.close()


def test_resolve_wandb_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv("NETRC", raising=False)
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_wandb_mode("auto") == "offline"
    assert resolve_wandb_mode("online") == "online"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_wandb_mode("auto") == "online"
    assert resolve_wandb_mode("offline") == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert resolve_wandb_mode("auto") == "disabled"
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.delenv("WANDB_API_KEY")
    (tmp_path / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    os.chmod(tmp_path / ".netrc", 0o600)
    assert resolve_wandb_mode("auto") == "online"
    with pytest.raises(ValueError, match="wandb_mode"):
        resolve_wandb_mode("sometimes")


# ------------------------------------------------------------------ plot


def test_plot_learning_curve_writes_png(tmp_path):
    import matplotlib.image

    with RunLogger(tmp_path / "a", NO_BACKENDS, {}, "a") as lg:
        for s in range(20):
            lg.log(s * 100, {"episode_return": s % 5 + 0.1 * s})
            if s % 3 == 0:
                lg.log(s * 100 + 1, {"loss": 1.0})  # rows without episode_return are skipped
    out = tmp_path / "plots" / "curve.png"
    assert plot_learning_curve(tmp_path / "a" / "metrics.csv", out, smooth=0.6, title="t") == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(out)
    assert img.shape[0] > 100 and img.shape[1] > 100
    # several runs on one plot
    plot_learning_curve([tmp_path / "a" / "metrics.csv"] * 2, tmp_path / "two.png",
                        labels=["x", "y"])
    assert (tmp_path / "two.png").stat().st_size > 0
    with pytest.raises(ValueError, match="no column 'reward'; columns: step, wall_time"):
        plot_learning_curve(tmp_path / "a" / "metrics.csv", out, y="reward")
    with pytest.raises(ValueError, match="smooth"):
        plot_learning_curve(tmp_path / "a" / "metrics.csv", out, smooth=1.0)
    with pytest.raises(FileNotFoundError):
        plot_learning_curve(tmp_path / "nope.csv", out)


# ------------------------------------------------------------------ progress


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_without_tty_prints_lines_not_a_bar(monkeypatch):
    # no terminal: no bar redraws on stderr; status lines on stdout instead (tests/test_progress.py)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    err = FakeTTY()
    p = progress(1000, file=err)
    assert p.enabled and p.mode == "lines"
    p.update(10, episode_return=1.0)
    p.close()
    assert err.getvalue() == ""
    assert "step 10/1,000" in sys.stdout.getvalue()
    monkeypatch.setattr(sys, "stdout", FakeTTY())
    assert not progress(1000, enabled=False, file=err).enabled


def test_progress_shows_rate_and_return(monkeypatch):
    monkeypatch.setattr(sys, "stdout", FakeTTY())
    err = FakeTTY()
    p = progress(1000, initial=100, file=err)
    assert p.enabled and isinstance(p, Progress)
    p.update(400, episode_return=1.25, fps=3.0)
    p.update(1000, episode_return=2.5)
    p.close()
    text = err.getvalue()
    assert "1.00k/1.00k" in text or "1000/1000" in text
    assert "return=2.5" in text and "step/s" in text


def test_dashboard_namespaces_env_frames_and_hparams(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from r2ac.logger import namespaced

    assert [namespaced(k) for k in ("episode_return", "total_loss", "lr", "steps_per_s", "env_failures",
                                    "policy_lag_mean", "eval/return_mean")] == [
        "train/episode_return", "learner/total_loss", "learner/lr", "system/steps_per_s", "system/env_failures",
        "system/policy_lag_mean", "eval/return_mean"]
    config = {"name": "x", "learner": {"discount": 0.99, "optimizer": "adam"}, "env": {"options": {"a": 1}}}
    with RunLogger(tmp_path, {"tensorboard": True, "wandb": False}, config, "r", frames_per_step=4) as lg:
        lg.log(10, {"episode_return": 1.0, "total_loss": 0.5})
    assert read_metrics(tmp_path / "metrics.csv")[0] == ["step", "wall_time", "episode_return", "total_loss"]
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert {"train/episode_return", "learner/total_loss", "system/env_frames"} <= set(acc.Tags()["scalars"])
    assert [(e.step, e.value) for e in acc.Scalars("system/env_frames")] == [(10, 40.0)]
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = acc.PluginTagToContent("hparams")
    start = next(plugin_data_pb2.HParamsPluginData.FromString(v) for v in content.values()
                 if plugin_data_pb2.HParamsPluginData.FromString(v).HasField("session_start_info"))
    hp = start.session_start_info.hparams
    assert hp["learner.discount"].number_value == 0.99 and hp["learner.optimizer"].string_value == "adam"
    assert hp["env.options"].string_value == "{'a': 1}"


def test_one_row_run_plots_a_visible_point(tmp_path):
    import matplotlib.image

    with RunLogger(tmp_path, NO_BACKENDS, {}, "r") as lg:
        lg.log(100, {"episode_return": 0.5})
    png = plot_learning_curve(tmp_path / "metrics.csv", tmp_path / "curve.png", smooth=0.6)
    img = matplotlib.image.imread(png)[..., :3]
    blue = (img[..., 2] > 0.5) & (img[..., 0] < 0.3)  # matplotlib's first colour (#1f77b4)
    assert blue.sum() > 20  # the marker is drawn (a one-point line alone leaves no pixels)


def test_another_csv_name_moves_its_own_file_aside(tmp_path):
    with RunLogger(tmp_path, NO_BACKENDS, {}, "r", csv_name="updates.csv") as lg:
        lg.log(1, {"a": 1})
    with pytest.warns(RuntimeWarning, match="updates.1.csv"):
        RunLogger(tmp_path, NO_BACKENDS, {}, "r", csv_name="updates.csv").close()
    assert rows_of(tmp_path / "updates.1.csv")[1][0] == "1" and not os.path.exists(tmp_path / "metrics.csv")
