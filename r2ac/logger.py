"""Run logging: metrics.csv, TensorBoard, Weights & Biases, a progress bar and learning curves.

``metrics.csv`` (in the run directory) has the columns ``step, wall_time`` followed by every
metric key in the order it was first logged.  When a new key appears the file is rewritten
atomically with the grown header (earlier rows get empty cells for the new column), so the file
is always one valid CSV.  On resume (``resume_step=N``) rows with ``step > N`` -- logged after
the checkpoint being resumed from -- are dropped and new rows are appended; a fresh run
(``resume_step=None``) moves an existing ``metrics.csv`` aside to ``metrics.<k>.csv``
instead of mixing two runs in one file.

Optional back-ends never stop training: a failure to import, start or log to TensorBoard or
W&B is reported once with a warning and that back-end is switched off.
"""

from __future__ import annotations

import csv
import io
import math
import netrc
import os
import secrets
import string
import sys
import time
import warnings
from typing import Any, Iterable, Mapping

from r2ac.fileio import atomic_write, atomic_write_text

__all__ = ["RunLogger", "Progress", "progress", "plot_learning_curve", "resolve_wandb_mode",
           "read_metrics", "namespaced", "flatten_config", "open_wandb_run"]

_RESERVED = ("step", "wall_time")


def _warn(msg: str) -> None:
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _atomic_write_text(path: str, text: str) -> None:
    atomic_write_text(path, text)


def _section_get(section: Any, key: str, default: Any) -> Any:
    if section is None:
        return default
    if isinstance(section, Mapping):
        return section.get(key, default)
    return getattr(section, key, default)


def resolve_wandb_mode(mode: str = "auto") -> str:
    """``"online"``/``"offline"``/``"disabled"`` for a ``logger.wandb_mode`` value.

    ``auto``: the ``WANDB_MODE`` environment variable if set, else ``online`` when an API key
    is available (``WANDB_API_KEY`` or a ``wandb login`` entry in ~/.netrc), else ``offline``.
    """
    if mode in ("online", "offline"):
        return mode
    if mode != "auto":
        raise ValueError(f"logger.wandb_mode must be 'auto', 'online' or 'offline', got {mode!r}")
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    try:
        host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1]
        host = host.split("/")[0].split(":")[0]
        if netrc.netrc().authenticators(host):
            return "online"
    except (OSError, netrc.NetrcParseError):
        pass
    return "offline"


def _new_run_id() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def _to_float(v: Any) -> float:
    if hasattr(v, "item"):  # torch / numpy scalars
        v = v.item()
    if isinstance(v, bool):
        return float(v)
    return float(v)


def _fmt(v: float) -> str:
    return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


# Dashboard namespaces (TensorBoard tags, W&B keys): metrics.csv keeps the plain names.
_TRAIN_KEYS = ("episode_return", "episode_length", "episodes", "episode_success")
_SYSTEM_HINTS = ("_per_s", "busy", "bytes", "failures", "rejected", "lost_", "actor", "policy_lag", "memory",
                 "rss", "cpu", "node", "in_flight", "queue", "unroll_length", "rtrl", "skipped", "updates")


# W&B gets the namespaced names, as TensorBoard does (``learner/total_loss``, ``train/episode_return``); False
# sends it the plain names of metrics.csv instead (the W&B keys before namespacing).
WANDB_NAMESPACES = True


def namespaced(key: str) -> str:
    """The dashboard name of a metric: ``train/`` (episodes), ``system/`` (throughput, failures, lag,
    counters), ``learner/`` (losses and the other update statistics); names with a ``/`` stay as they are."""
    if "/" in key:
        return key
    if key in _TRAIN_KEYS:
        return "train/" + key
    if any(h in key for h in _SYSTEM_HINTS):
        return "system/" + key
    return "learner/" + key


def flatten_config(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"learner": {"discount": 0.99}}`` -> ``{"learner.discount": 0.99}``; values TensorBoard's hparams
    take (numbers, strings, bools), anything else (lists, mappings) as its text."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v and prefix.count(".") < 1 and key not in ("env.options", "model.core_options"):
            out.update(flatten_config(v, key))
        elif isinstance(v, (bool, int, float, str)):
            out[key] = v
        else:
            out[key] = str(v)
    return out


_WANDB_MODES: dict[int, str] = {}  # id(run) -> the mode it was started in


def open_wandb_run(run_dir: str, section: Any, config_dict: dict | None, run_name: str, *,
                   resume: bool, x_axis: str = "env_frames") -> Any:
    """Start (or, with ``resume``, continue by the id stored in ``<run_dir>/wandb_run_id``) the W&B run of a
    run directory; ``None`` where W&B is unavailable (reported with a warning). Charts use ``x_axis``."""
    try:
        import wandb
    except Exception as e:
        _warn(f"W&B logging disabled: cannot import wandb ({e}); pip install wandb, or set "
              "logger.wandb=false")
        return None
    mode = resolve_wandb_mode(_section_get(section, "wandb_mode", "auto"))
    if mode == "disabled":
        return None
    id_path = os.path.join(run_dir, "wandb_run_id")
    run_id = None
    if resume and os.path.exists(id_path):
        with open(id_path, encoding="utf-8") as fh:
            run_id = fh.read().strip() or None
    if run_id is None:
        run_id = _new_run_id()
        _atomic_write_text(id_path, run_id + "\n")
    kwargs = dict(
        project=_section_get(section, "wandb_project", "r2ac"),
        group=_section_get(section, "wandb_group", "") or None,
        tags=list(_section_get(section, "wandb_tags", []) or []) or None,
        name=run_name,
        config=dict(config_dict or {}),
        dir=run_dir,
        id=run_id,
        resume="allow",
        reinit="create_new",
    )
    run = None
    for attempt in ([mode, "offline"] if mode == "online" else [mode]):
        try:
            run = wandb.init(mode=attempt, settings=wandb.Settings(init_timeout=60), **kwargs)
            _WANDB_MODES[id(run)] = attempt
            break
        except Exception as e:
            _warn(f"W&B init ({attempt}) failed: {type(e).__name__}: {e}"
                  + ("; retrying offline" if attempt == "online" else "; W&B logging disabled for this run"))
    if run is not None:
        try:
            run.define_metric("agent_step")
            if x_axis != "agent_step":
                run.define_metric(x_axis)
            run.define_metric("*", step_metric=x_axis)
        except Exception as e:
            _warn(f"W&B define_metric failed ({e}); charts use W&B's own step")
    return run


def read_metrics(path: str | os.PathLike) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows (dicts of strings) of a metrics CSV; a partial last line is ignored."""
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]  # a row cut short by a crash
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None) or []
    rows = []
    for rec in reader:
        if len(rec) != len(header):
            continue
        rows.append(dict(zip(header, rec)))
    return header, rows


class RunLogger:
    """Writes metrics of one run to metrics.csv, TensorBoard and (optionally) W&B.

    Args:
        run_dir: the run directory (created if missing).
        cfg_logger_section: the ``logger`` section (a ``LoggerConfig`` or a dict; ``None`` for
            the defaults except W&B off).
        config_dict: the resolved config as a plain dict (sent to W&B).
        run_name: display name (W&B run name).
        resume_step: the step of the checkpoint being resumed from, or ``None`` for a fresh run.
        csv_name: the CSV file's name in ``run_dir`` (``metrics.csv``; ``updates.csv`` for the learner's
            per-update log, ``logger.update_log``).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        cfg_logger_section: Any = None,
        config_dict: dict | None = None,
        run_name: str = "run",
        *,
        resume_step: int | None = None,
        frames_per_step: float = 1.0,
        csv_name: str = "metrics.csv",
    ):
        self.run_dir = os.fspath(run_dir)
        self.frames_per_step = float(frames_per_step)
        self._config_dict = dict(config_dict or {})
        os.makedirs(self.run_dir, exist_ok=True)
        self.run_name = run_name
        self.resume_step = resume_step
        self.csv_path = os.path.join(self.run_dir, csv_name)
        self._closed = False
        self._warned_keys: set[str] = set()
        self._start = time.time()

        self._columns: list[str] = list(_RESERVED)
        self._csv_fh = None
        self._init_csv()

        self._tb = None
        if _section_get(cfg_logger_section, "tensorboard", True):
            self._init_tensorboard()

        self._wandb_run = None
        self.wandb_mode: str | None = None
        if _section_get(cfg_logger_section, "wandb", False):
            self._init_wandb(cfg_logger_section, config_dict)

    # ---------------------------------------------------------------- csv
    def _init_csv(self) -> None:
        path = self.csv_path
        if os.path.exists(path) and os.path.getsize(path) > 0:
            if self.resume_step is None:
                stem = os.path.splitext(os.path.basename(path))[0]
                k = 1
                while os.path.exists(os.path.join(self.run_dir, f"{stem}.{k}.csv")):
                    k += 1
                aside = os.path.join(self.run_dir, f"{stem}.{k}.csv")
                os.replace(path, aside)
                _warn(f"{path} exists from an earlier run; moved it to {aside} (this is a fresh "
                      "run: pass resume_step to continue the old file)")
            else:
                header, rows = read_metrics(path)
                if not header or header[: len(_RESERVED)] != list(_RESERVED):
                    raise ValueError(
                        f"{path} is not an r2ac metrics file (header {header[:3]}...); move it "
                        "away to resume"
                    )
                kept = []
                for r in rows:
                    try:
                        if int(float(r["step"])) <= self.resume_step:
                            kept.append(r)
                    except ValueError:
                        continue
                self._columns = header
                with open(path, encoding="utf-8", newline="") as fh:
                    clean = fh.read().endswith("\n")
                if len(kept) != len(rows) or not clean:
                    self._rewrite(kept)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            self._rewrite([])
        self._csv_fh = open(path, "a", encoding="utf-8", newline="")
        self._csv = csv.writer(self._csv_fh)

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(self._columns)
        for r in rows:
            w.writerow([r.get(c, "") for c in self._columns])
        _atomic_write_text(self.csv_path, buf.getvalue())

    def _grow_header(self, new_keys: list[str]) -> None:
        if self._csv_fh is not None:
            self._csv_fh.close()
        _, rows = read_metrics(self.csv_path)
        self._columns = self._columns + new_keys
        self._rewrite(rows)
        self._csv_fh = open(self.csv_path, "a", encoding="utf-8", newline="")
        self._csv = csv.writer(self._csv_fh)

    # ---------------------------------------------------------------- tensorboard
    def _init_tensorboard(self) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter

            purge = self.resume_step + 1 if self.resume_step is not None else None
            self._tb = SummaryWriter(
                log_dir=os.path.join(self.run_dir, "tensorboard"), purge_step=purge, flush_secs=30
            )
            if self._config_dict and self.resume_step is None:
                self._write_hparams()
        except Exception as e:  # missing tensorboard package, unwritable dir, ...
            _warn(f"TensorBoard logging disabled: {type(e).__name__}: {e} "
                  "(pip install tensorboard, or set logger.tensorboard=false)")
            self._tb = None

    def _write_hparams(self) -> None:
        """The resolved config as TensorBoard hparams of this run (its HPARAMS tab), linked to the
        episode return and the evaluation return."""
        try:
            from torch.utils.tensorboard.summary import hparams

            exp, ssi, sei = hparams(flatten_config(self._config_dict),
                                    {"train/episode_return": float("nan"), "eval/return_mean": float("nan")})
            writer = self._tb._get_file_writer()
            for summ in (exp, ssi, sei):
                writer.add_summary(summ)
        except Exception as e:  # hparams are a convenience; the scalars matter
            _warn(f"TensorBoard hparams not written: {type(e).__name__}: {e}")

    # ---------------------------------------------------------------- wandb
    def _init_wandb(self, section: Any, config_dict: dict | None) -> None:
        self._wandb_run = open_wandb_run(self.run_dir, section, config_dict, self.run_name,
                                         resume=self.resume_step is not None)
        if self._wandb_run is not None:
            self.wandb_mode = _WANDB_MODES.get(id(self._wandb_run))
            if self.wandb_mode == "offline":
                print(f"W&B offline run in {self.run_dir}/wandb; upload later with "
                      f"`wandb sync {self.run_dir}/wandb/offline-run-*`", file=sys.stderr)

    @property
    def wandb_run(self) -> Any:
        return self._wandb_run

    # ---------------------------------------------------------------- api
    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Log ``metrics`` (name -> number) at agent step ``step``."""
        if self._closed:
            raise RuntimeError("RunLogger.log called after close()")
        step = int(step)
        clean: dict[str, float] = {}
        for k, v in metrics.items():
            k = str(k)
            if k in _RESERVED:
                if k not in self._warned_keys:
                    self._warned_keys.add(k)
                    _warn(f"metric name {k!r} is reserved for the CSV index column; not logged")
                continue
            try:
                clean[k] = _to_float(v)
            except (TypeError, ValueError):
                if k not in self._warned_keys:
                    self._warned_keys.add(k)
                    _warn(f"metric {k!r} has non-numeric value {v!r} ({type(v).__name__}); "
                          "not logged")
        new = [k for k in clean if k not in self._columns]
        if new:
            self._grow_header(new)
        row = {"step": str(step), "wall_time": f"{time.time():.3f}"}
        row.update({k: _fmt(v) for k, v in clean.items()})
        self._csv.writerow([row.get(c, "") for c in self._columns])
        self._csv_fh.flush()

        self.log_dashboards(step, clean)

    def log_dashboards(self, step: int, metrics: Mapping[str, float], media: Mapping[str, Any] | None = None) -> None:
        """Send metrics to TensorBoard (x: agent steps) and W&B (x: env frames, agent_step too) under their
        namespaces (:func:`namespaced`), with ``system/env_frames``; not to metrics.csv (``log`` does both).
        ``media``: W&B-only extras (e.g. ``{"eval/video": wandb.Video(...)}``)."""
        step = int(step)
        frames = int(round(step * self.frames_per_step))
        named = {namespaced(k): float(v) for k, v in metrics.items()}
        named.setdefault("system/env_frames", float(frames))
        if self._tb is not None:
            try:
                for k, v in named.items():
                    self._tb.add_scalar(k, v, global_step=step)
            except Exception as e:
                _warn(f"TensorBoard logging failed ({type(e).__name__}: {e}); disabled")
                self._tb = None

        if self._wandb_run is not None:
            try:
                payload = named if WANDB_NAMESPACES else dict(metrics)
                self._wandb_run.log({**payload, **(media or {}), "agent_step": step, "env_frames": frames})
            except Exception as e:
                _warn(f"W&B logging failed ({type(e).__name__}: {e}); disabled")
                self._wandb_run = None

    def flush(self) -> None:
        if self._csv_fh is not None and not self._csv_fh.closed:
            self._csv_fh.flush()
            os.fsync(self._csv_fh.fileno())
        if self._tb is not None:
            try:
                self._tb.flush()
            except Exception:
                pass

    def close(self) -> None:
        """Flush and close every back-end (safe to call twice)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
        finally:
            if self._csv_fh is not None:
                self._csv_fh.close()
            if self._tb is not None:
                try:
                    self._tb.close()
                except Exception as e:
                    _warn(f"closing TensorBoard writer failed: {e}")
            if self._wandb_run is not None:
                try:
                    self._wandb_run.finish()
                except Exception as e:
                    _warn(f"W&B finish failed: {e}")
                self._wandb_run = None

    def __enter__(self) -> "RunLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -------------------------------------------------------------------- progress bar


class Progress:
    """Progress over agent steps, in one of three modes (``mode``):

    * ``"bar"``: a live tqdm bar (a terminal);
    * ``"lines"``: one status line every ``interval_s`` seconds (``ray job logs``, CI, nohup, containers:
      anything that is not a terminal): steps, steps/s, frames/s, the recent return and the ETA;
    * ``"off"``: a no-op.

    ``update`` takes the absolute step. ``enabled`` is True unless the mode is ``"off"``.
    """

    def __init__(self, total: int, *, initial: int = 0, enabled: bool = True,
                 desc: str = "train", file: Any = None, mode: str | None = None,
                 interval_s: float = 30.0, frames_per_step: float = 1.0):
        self.mode = ("bar" if enabled else "off") if mode is None else mode
        if self.mode not in ("bar", "lines", "off"):
            raise ValueError(f"progress mode must be bar, lines or off, not {mode!r}")
        self.enabled = self.mode != "off"
        self.total, self.desc = int(total), desc
        self.interval_s, self.frames_per_step = float(interval_s), float(frames_per_step)
        self._file = file
        self._bar = None
        self._step = self._line_step = int(initial)
        self._return: float | None = None
        self._t0 = self._line_t = time.monotonic()
        self._initial = int(initial)
        if self.mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=desc, unit="step",
                             unit_scale=True, dynamic_ncols=True, file=file or sys.stderr,
                             smoothing=0.1)

    def update(self, step: int, episode_return: float | None = None, **info: Any) -> None:
        if self.mode == "off":
            return
        step = int(step)
        if episode_return is not None and math.isfinite(float(episode_return)):
            self._return = float(episode_return)
        if self._bar is not None:
            delta = step - self._bar.n
            if delta:
                self._bar.update(delta)
            post = {}
            if self._return is not None:
                post["return"] = f"{self._return:.3g}"
            for k, v in info.items():
                post[k] = f"{v:.3g}" if isinstance(v, float) else v
            if post:
                self._bar.set_postfix(post, refresh=False)
            return
        self._step = max(self._step, step)
        now = time.monotonic()
        if now - self._line_t >= self.interval_s:
            self._print_line(now)

    def status_line(self, now: float | None = None) -> str:
        """The line the ``"lines"`` mode prints: rates over the last interval, ETA at that rate."""
        now = time.monotonic() if now is None else now
        dt = max(now - self._line_t, 1e-9)
        rate = max(self._step - self._line_step, 0) / dt
        pct = 100.0 * self._step / self.total if self.total > 0 else 100.0
        parts = [f"[{self.desc}] step {self._step:,}/{self.total:,} ({pct:.1f}%)",
                 f"{rate:,.0f} steps/s", f"{rate * self.frames_per_step:,.0f} frames/s",
                 f"return {self._return:.3g}" if self._return is not None else "return -"]
        left = self.total - self._step
        if left <= 0:
            parts.append(f"elapsed {_duration(now - self._t0)}")
        elif rate > 0:
            parts.append(f"ETA {_duration(left / rate)}")
        else:
            parts.append("ETA -")
        return "  ".join(parts)

    def _print_line(self, now: float) -> None:
        print(self.status_line(now), file=self._file or sys.stdout, flush=True)
        self._line_t, self._line_step = now, self._step

    def write(self, msg: str) -> None:
        """Print a line without breaking the bar."""
        if self._bar is not None:
            self._bar.write(msg)
        else:
            print(msg, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.mode == "lines" and self._step > self._line_step:
            self._print_line(time.monotonic())  # the last stretch, so the log ends at the final step
        self.mode, self.enabled = "off", False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _duration(seconds: float) -> str:
    s = int(round(max(seconds, 0.0)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def _isatty(f: Any) -> bool:
    try:
        return bool(f is not None and f.isatty())
    except Exception:
        return False


def progress(total: int, *, initial: int = 0, enabled: bool = True, desc: str = "train",
             file: Any = None, interval_s: float | None = None, frames_per_step: float = 1.0) -> Progress:
    """Progress over ``total`` agent steps, visible wherever the output goes.

    On a terminal (stdout and the bar's stream, stderr by default): a live bar with steps/s and the
    recent return. Otherwise (``ray job logs``, CI, nohup, container logs): one status line on stdout
    every ``interval_s`` seconds (default 30; the runtimes pass ``logger.log_interval_s``) with steps,
    steps/s, frames/s (``frames_per_step`` env frames per agent step), the recent return and the ETA,
    and a last line at ``close``. Off (a no-op object) when ``enabled`` is False
    (``logger.progress_bar``).
    """
    stream = file or sys.stderr
    if not enabled:
        mode = "off"
    elif _isatty(sys.stdout) and _isatty(stream):
        mode = "bar"
    else:
        mode = "lines"
    return Progress(total, initial=initial, desc=desc, file=stream if mode == "bar" else None, mode=mode,
                    interval_s=30.0 if interval_s is None else interval_s, frames_per_step=frames_per_step)


# -------------------------------------------------------------------- plotting


def _ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard-style debiased exponential moving average."""
    out, acc, norm = [], 0.0, 0.0
    for v in values:
        acc = weight * acc + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out.append(acc / norm)
    return out


_AXIS_WORDS = {"step": "agent steps", "env_frames": "env frames", "episode_return": "episode return",
               "episode_length": "episode length (agent steps)", "wall_time": "wall time (s)"}


def plot_learning_curve(
    metrics_csv: str | os.PathLike | Iterable[str | os.PathLike],
    out_png: str | os.PathLike,
    x: str = "step",
    y: str = "episode_return",
    *,
    smooth: float = 0.0,
    title: str | None = None,
    labels: Iterable[str] | None = None,
) -> str:
    """Plot ``y`` against ``x`` from one or more metrics CSVs into a PNG (atomic write).

    ``smooth`` in [0, 1): weight of an exponential moving average (0 = raw only); with
    smoothing the raw curve is drawn faintly underneath.  Rows with an empty ``y`` cell are
    skipped.  Returns the PNG path.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not 0.0 <= smooth < 1.0:
        raise ValueError(f"smooth must be in [0, 1) (EMA weight), got {smooth}")
    paths = ([metrics_csv] if isinstance(metrics_csv, (str, os.PathLike))
             else list(metrics_csv))
    if not paths:
        raise ValueError("plot_learning_curve: no metrics files given")
    labels = list(labels) if labels is not None else [
        os.path.basename(os.path.dirname(os.path.abspath(p))) or os.fspath(p) for p in paths
    ]
    fig = Figure(figsize=(7, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    plotted = 0
    for path, label in zip(paths, labels):
        if not os.path.exists(path):
            raise FileNotFoundError(f"metrics file not found: {path}")
        header, rows = read_metrics(path)
        for col in (x, y):
            if col not in header:
                raise ValueError(f"{path} has no column {col!r}; columns: {', '.join(header)}")
        xs, ys = [], []
        for r in rows:
            if r.get(x, "") == "" or r.get(y, "") == "":
                continue
            try:
                xv, yv = float(r[x]), float(r[y])
            except ValueError:
                continue
            if math.isfinite(xv) and math.isfinite(yv):
                xs.append(xv)
                ys.append(yv)
        if not xs:
            continue
        plotted += 1
        marker = "o" if len(xs) < 3 else None  # a line through one point draws nothing: mark the points
        if smooth > 0:
            line = ax.plot(xs, ys, alpha=0.25, linewidth=1, marker=marker)[0]
            ax.plot(xs, _ema(ys, smooth), color=line.get_color(), linewidth=1.8, label=label, marker=marker)
        else:
            ax.plot(xs, ys, linewidth=1.5, label=label, marker=marker)
    if plotted == 0:
        raise ValueError(f"no finite values of {y!r} against {x!r} in {', '.join(map(str, paths))}")
    ax.set_xlabel(_AXIS_WORDS.get(x, x))
    ax.set_ylabel(_AXIS_WORDS.get(y, y))
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    if len(paths) > 1:
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()

    out_png = os.fspath(out_png)
    atomic_write(out_png, lambda fh: fig.savefig(fh, format="png"))
    return out_png
