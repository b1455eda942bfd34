"""r2ac where its users run it: the image built, docker/docker-compose.yml run to a finished training, and
a two-node Ray cluster in containers that takes a `ray job submit` from the host, loses its worker node
mid-run, goes on, and resumes. Real podman containers, real Ray, real files on the host.

Runs with `make test-cluster` (R2AC_CLUSTER_TEST=1), which first installs podman where it can
(docker/podman/setup-host.sh). Skipped in `make test` and where podman is missing, with the reason.
Every container, network and volume a test starts is removed when it ends, also when it fails; images
are kept (layers are reused by the next run; `podman rmi` them to free the space).

Knobs (environment): R2AC_PYTHON_IMAGE (a python:3.11 bookworm image; default: made by
docker/podman/base-image.sh), DMLAB_WHEEL (a deepmind_lab wheel: also build the DeepMind Lab target),
R2AC_TORCH_FIND_LINKS (a folder with the torch wheel; default: pip's find-links if it has one).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "r2ac/r2ac:0.1.0"
DMLAB_IMAGE = "r2ac/dmlab-wheel:lab-b1db91a"
# Quickstart-sized and short: the quickstart's T-maze task and model, a few thousand steps.
TRAIN_ARGS = ["total_steps=16000", "env.num_envs=16", "learner.batch_size=16", "eval.sets=0",
              "checkpoint.interval_s=5", "logger.log_interval_s=2"]

# The two-node job: long enough that the worker node dies mid-run (the T-maze trains at ~4,600 steps/s on
# 2 actors here, 48,000 steps were over before the kill landed) and the replacement node takes over.
JOB_STEPS = 240000

pytestmark = [
    pytest.mark.skipif(os.environ.get("R2AC_CLUSTER_TEST") != "1",
                       reason="container cluster test: run `make test-cluster` (podman images, compose, a "
                              "two-node Ray cluster; ~10-20 min)"),
    # The first test also builds the base image and the image (its fixtures): minutes, not the 600 s default.
    pytest.mark.timeout(3600),
]

TIMINGS: dict[str, float] = {}


def say(msg: str) -> None:
    print(f"[test-cluster] {msg}", flush=True)


def run(cmd: list[str], env: dict, timeout: float = 600, check: bool = True, nice: bool = False,
        what: str = "", fix: str = "") -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure one line says what failed and ``fix``, then the command's last lines."""
    full = (["nice", "-n", "19"] if nice else []) + cmd
    try:
        out = subprocess.run(full, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what or cmd[:3]} did not finish within {timeout:.0f} s")
    if check and out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).splitlines()[-30:])
        pytest.fail(f"{what or ' '.join(cmd[:4])} failed (exit {out.returncode}){': ' + fix if fix else ''}:\n{tail}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_links_with_torch() -> str | None:
    explicit = os.environ.get("R2AC_TORCH_FIND_LINKS")
    if explicit:
        return explicit
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        m = re.match(r"^\S*find-links='([^']+)'", line)
        if m and any(Path(m.group(1)).glob("torch-2.13.0*cp311*.whl")):
            return m.group(1)
    return None


def dmlab_wheel() -> Path | None:
    w = os.environ.get("DMLAB_WHEEL")
    return Path(w) if w and Path(w).is_file() else None


# --------------------------------------------------------------------------- the engine and the image


@pytest.fixture(scope="module")
def podman() -> dict:
    """The environment podman runs with: a containers.conf of our own (CONTAINERS_CONF) with ulimits this
    host allows (processes here may lack CAP_SYS_RESOURCE: podman's default nofile of 1048576 makes runc
    fail with "error setting rlimit type 7"), and runc where it is installed."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (docker/podman/setup-host.sh installs it on Debian as root)")
    work = Path(tempfile.mkdtemp(prefix="r2ac-cluster-", dir="/var/tmp"))
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 65536 if nofile == resource.RLIM_INFINITY else min(nofile, 65536)
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
    conf = work / "containers.conf"
    # k8s-file: `podman logs` works without journald (the default driver where systemd is there).
    text = (f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
            f'log_driver = "k8s-file"\n')
    if shutil.which("runc"):
        text += '[engine]\nruntime = "runc"\n'
    conf.write_text(text)
    env = {**os.environ, "CONTAINERS_CONF": str(conf), "R2AC_NOFILE": str(nofile)}
    for k in [k for k in env if k.startswith(("RAY_", "R2AC_RUNS", "WANDB_"))]:
        env.pop(k)
    info = run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], env, timeout=120,
               what="podman info")
    say(f"podman runtime {info.stdout.strip()}, nofile {nofile}, work dir {work}")
    yield {"env": env, "work": work, "nofile": nofile, "nproc": nproc}
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def image(podman) -> str:
    """docker/r2ac.Dockerfile built with podman (target `base`, or the default target with DeepMind Lab
    when DMLAB_WHEEL names a wheel)."""
    env = podman["env"]
    t0 = time.time()
    base = os.environ.get("R2AC_PYTHON_IMAGE")
    if not base:
        base = "localhost/bookworm-python:3.11"
        run([str(ROOT / "docker/podman/base-image.sh"), base], env, timeout=1800, nice=True,
            what="the base image (docker/podman/base-image.sh)")
    TIMINGS["base_image_s"] = time.time() - t0
    args = ["--format", "docker", "--network", "host", "--build-arg", f"PYTHON_IMAGE={base}"]
    links = find_links_with_torch()
    if links:
        args += ["-v", f"{links}:{links}:ro", "--build-arg", f"TORCH_FIND_LINKS={links}"]
    wheel = dmlab_wheel()
    t1 = time.time()
    if wheel is not None:
        run(["podman", "build", *args, "-f", "docker/dmlab.Dockerfile", "--build-arg", "DMLAB_FROM=prebuilt",
             "--build-context", f"prebuilt={wheel.parent}", "-t", DMLAB_IMAGE, "."], env, timeout=3600,
            nice=True, what="the DeepMind Lab wheel image (docker/dmlab.Dockerfile)")
        target = ["--build-arg", f"DMLAB_WHEEL_IMAGE={DMLAB_IMAGE}"]
    else:
        say("DMLAB_WHEEL not set: building the image without DeepMind Lab (--target base)")
        target = ["--target", "base"]
    run(["podman", "build", *args, *target, "-f", "docker/r2ac.Dockerfile", "-t", IMAGE, "."], env,
        timeout=3600, nice=True, what="the r2ac image (docker/r2ac.Dockerfile)",
        fix="the build's last lines below name the failing step; `podman build --format docker -f "
            "docker/r2ac.Dockerfile --target base .` repeats it (docs/deployment.md, section 2)")
    TIMINGS["image_build_s"] = time.time() - t1
    # The image's own checks: non-root, pip check, r2ac importable.
    out = run(["podman", "run", "--rm", IMAGE, "bash", "-c",
               "id -u && pip check && python -c 'import r2ac, ray, torch; print(ray.__version__)'"],
              env, timeout=300, what="the image's self-check")
    uid, _, ray_version = out.stdout.split("\n")[:3]
    assert uid.strip() == "1000" and ray_version.strip() == "2.60.0", out.stdout
    if wheel is not None:
        run(["podman", "run", "--rm", IMAGE, "python", "-c", "import deepmind_lab"], env, timeout=300,
            what="deepmind_lab in the image")
    return IMAGE


def host_runs(podman, name: str) -> Path:
    """A host folder for a run directory, writable by the images' user (UID 1000)."""
    d = podman["work"] / name
    d.mkdir(parents=True, exist_ok=True)
    os.chown(d, 1000, 1000)
    return d


def check_run_dir(run_dir: Path, status: str = "finished", min_step: int = 1) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == status, summary
    assert summary["step"] >= min_step, summary
    metrics = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(metrics) >= 2 and metrics[0].startswith("step,wall_time"), metrics[:3]
    assert (run_dir / "checkpoints" / "latest").is_file()
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    assert (run_dir / "checkpoints" / latest).is_file()
    return summary


# --------------------------------------------------------------------------- docker-compose.yml


def _compose(podman, image, name: str, **settings: str) -> tuple[dict, list[str], str, Path]:
    """The environment, base command, project name and host runs folder of a compose project."""
    compose_cmd = shutil.which("podman-compose")
    if compose_cmd is None:
        pytest.skip("podman-compose is not installed (apt-get install podman-compose)")
    # A copy of the compose file in a folder of its own: podman-compose reads `.env` beside the file and it
    # wins over the environment, so a user's docker/.env must not leak into the test.
    cdir = podman["work"] / name
    cdir.mkdir()
    shutil.copy(ROOT / "docker" / "docker-compose.yml", cdir / "docker-compose.yml")
    runs = host_runs(podman, f"runs-{name}")
    project = f"r2ac{name[:4]}{os.getpid()}"
    env = dict(podman["env"])
    env.update(RAY_AUTH_TOKEN=secrets.token_hex(16), R2AC_IMAGE=image, R2AC_RUNS=str(runs), R2AC_WORKERS="1",
               R2AC_WORKER_CPUS="2", R2AC_HEAD_CPUS="1", R2AC_NUM_ACTORS="2", R2AC_SHM_SIZE="1gb",
               R2AC_NPROC=str(podman["nproc"]), R2AC_DASHBOARD_PORT=str(free_port()))
    env.update(settings)
    return env, [compose_cmd, "-p", project, "-f", str(cdir / "docker-compose.yml")], project, runs


def _preflight(env: dict, cdir: Path) -> subprocess.CompletedProcess:
    """docker/preflight.py as a user runs it before `up` (the env file beside the copied compose file)."""
    return subprocess.run([sys.executable, str(ROOT / "docker" / "preflight.py"), "--env-file", str(cdir / ".env")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _project_left(env: dict, project: str) -> list[str]:
    """Containers and networks of a compose project that still exist."""
    ids = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter",
                          f"label=io.podman.compose.project={project}"], env=env, capture_output=True,
                         text=True).stdout.split()
    nets = [n for n in subprocess.run(["podman", "network", "ls", "--format", "{{.Name}}"], env=env,
                                      capture_output=True, text=True).stdout.split() if n.startswith(project)]
    return ids + nets


_FRAME = re.compile(r"\(\S*\+0x[0-9a-f]+\) \[0x[0-9a-f]+\]")  # a native stack frame: lib.so(sym+0x1f) [0x7f..]


def _log_tails(env: dict, containers: list[str], lines: int = 40) -> str:
    """The last ``lines`` of each container's log, for a failure message."""
    parts = []
    for c in containers:
        got = subprocess.run(["podman", "logs", "--tail", str(lines * 4), c], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        # A native backtrace (a Ray component's failed check) is dozens of frame lines that would push the line
        # naming the check out of the tail: keep its first frame, drop the rest.
        log = (got.stdout + got.stderr).splitlines()
        kept = [ln for i, ln in enumerate(log) if not (i and _FRAME.search(ln) and _FRAME.search(log[i - 1]))]
        parts.append(f"--- {c} ---\n" + "\n".join(kept[-lines:])[-4000:])
    return "\n".join(parts)


def test_compose_runs_a_training_to_the_end(podman, image):
    """docker/docker-compose.yml under podman-compose: head + a worker + the trainer; the trainer's
    quickstart-sized run finishes, its status lines are in its container log (stdout is no terminal there),
    and its run directory (with an offline W&B run) is on the host."""
    env, base, project, runs = _compose(podman, image, "compose", R2AC_WANDB="true", WANDB_MODE="offline",
                                        R2AC_TRAIN_ARGS=" ".join(TRAIN_ARGS))
    pre = _preflight(env, Path(base[-1]).parent)
    assert pre.returncode == 0 and "ready" in pre.stdout, pre.stdout + pre.stderr
    t0 = time.time()
    try:
        up = run([*base, "up", "-d", "ray-head", "worker", "trainer"], env, timeout=300, what="podman-compose up")
        # podman-compose 1.0.3 exits 0 even when a container fails to start: look at their states.
        states = run(["podman", "ps", "-a", "--filter", f"label=io.podman.compose.project={project}", "--format",
                      "{{.Names}} {{.State}}"], env, timeout=60, what="podman ps").stdout
        assert "created" not in states.lower(), \
            f"containers did not start:\n{states}\n{(up.stdout + up.stderr)[-2000:]}"
        trainer = f"{project}_trainer_1"
        try:  # the trainer exits in about 20 s; on a hang, the failure shows where each container stopped
            out = subprocess.run(["podman", "wait", trainer], env=env, cwd=ROOT, capture_output=True, text=True,
                                 timeout=300)
        except subprocess.TimeoutExpired:
            head = f"{project}_ray-head_1"
            ray_status = subprocess.run(["podman", "exec", head, "ray", "status", "-v"], env=env, cwd=ROOT,
                                        capture_output=True, text=True, timeout=120)
            pytest.fail("the trainer did not finish within 300 s; the containers' last log lines:\n"
                        + _log_tails(env, [trainer, head, f"{project}_worker_1"])
                        + f"\n--- ray status on the head ---\n{(ray_status.stdout + ray_status.stderr)[-4000:]}")
        TIMINGS["compose_up_to_trainer_exit_s"] = time.time() - t0
        logs = run(["podman", "logs", trainer], env, timeout=60, check=False)
        text = logs.stdout + logs.stderr
        assert out.stdout.strip() == "0", f"the trainer exited with {out.stdout.strip()}:\n{text[-3000:]}"
    finally:
        t1 = time.time()
        subprocess.run([*base, "down"], env=env, cwd=ROOT, capture_output=True, timeout=300)
        leftovers = _remove_project(env, project)
        TIMINGS["compose_down_s"] = time.time() - t1
    # podman-compose 1.0.3's `down` removes containers but not the project's network (removed above).
    assert not [x for x in leftovers if "containers" in x], f"podman-compose down left {leftovers} (removed now)"
    assert not _project_left(env, project)
    # Progress in the container log: `podman-compose logs` / `podman logs` show one status line per interval.
    # (A fast machine finishes 16,000 steps within one 2 s interval: then the last line is the only one.)
    status = re.findall(r"^\[train\] step [\d,]+/16,000 .*frames/s.*$", text, re.M)
    assert status, text[-3000:]
    summary = check_run_dir(runs / "compose", min_step=16000)
    assert summary["actor_nodes"] and summary["learner_node"], summary
    offline = list((runs / "compose" / "wandb").glob("offline-run-*"))
    assert offline and list(offline[0].glob("*.wandb")), "no offline W&B run (with its .wandb file) on the volume"
    # The learner says how to upload it, and `wandb sync` on the host reads it (a dry run: no network here).
    assert "wandb sync /opt/r2ac/runs/compose/wandb/offline-run-" in text, text[-3000:]
    sync = run([str(Path(sys.executable).parent / "wandb"), "sync", "--dry-run", str(offline[0])],
               {k: v for k, v in env.items() if k != "WANDB_API_KEY"}, timeout=300, what="wandb sync --dry-run")
    assert "Would sync 1 run(s)" in sync.stdout + sync.stderr, sync.stdout + sync.stderr
    say(f"compose: {summary['step']} steps, {TIMINGS['compose_up_to_trainer_exit_s']:.0f} s to the trainer's exit, "
        f"{len(status)} status lines in its log, e.g. {status[-1]!r}")


def test_compose_with_the_dashboard_port_taken_says_which_and_leaves_nothing(podman, image):
    """A user's most likely clash: something (a local `ray start --head`, another project) holds the host port
    compose publishes the dashboard on. docker/preflight.py names it and a free one; the head really cannot
    start (podman names the port); and the failed project leaves no container or network behind."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env, base, project, _ = _compose(podman, image, "porttaken", R2AC_DASHBOARD_PORT=str(port))
        pre = _preflight(env, Path(base[-1]).parent)
        lines = pre.stderr.strip().splitlines()
        assert pre.returncode == 1 and len(lines) == 1, pre.stdout + pre.stderr
        assert f"port 127.0.0.1:{port} (R2AC_DASHBOARD_PORT" in lines[0] and "set R2AC_DASHBOARD_PORT=" in lines[0]
        try:
            up = run([*base, "up", "-d", "ray-head"], env, timeout=300, check=False, what="podman-compose up")
            said = up.stdout + up.stderr
            assert re.search(rf"127\.0\.0\.1:{port}.*address already in use", said), said[-3000:]
        finally:
            subprocess.run([*base, "down"], env=env, cwd=ROOT, capture_output=True, timeout=300)
            _remove_project(env, project)
    assert not _project_left(env, project)
    say(f"port taken: preflight said {lines[0]!r}")


def _remove_project(env: dict, project: str) -> list[str]:
    """Remove what is left of a compose project (containers, networks, volumes); returns what was left."""
    left = []
    ids = subprocess.run(["podman", "ps", "-a", "-q", "--filter", f"label=io.podman.compose.project={project}"],
                         env=env, capture_output=True, text=True).stdout.split()
    if ids:
        left += [f"{len(ids)} containers"]
        subprocess.run(["podman", "rm", "-f", "-t", "5", *ids], env=env, capture_output=True)
    nets = [n for n in subprocess.run(["podman", "network", "ls", "--format", "{{.Name}}"], env=env,
                                      capture_output=True, text=True).stdout.split() if n.startswith(project)]
    if nets:
        left += [f"networks {nets}"]
        subprocess.run(["podman", "network", "rm", "-f", *nets], env=env, capture_output=True)
    vols = subprocess.run(["podman", "volume", "ls", "-q", "--filter", f"label=io.podman.compose.project={project}"],
                          env=env, capture_output=True, text=True).stdout.split()
    if vols:
        subprocess.run(["podman", "volume", "rm", "-f", *vols], env=env, capture_output=True)
    return left


# --------------------------------------------------------------------------- a two-node cluster


class Cluster:
    """Ray nodes as containers on one podman network; the head's job API on a host port."""

    def __init__(self, podman: dict, image: str, runs: Path):
        self.env, self.image, self.runs = dict(podman["env"]), image, runs
        self.nofile = podman["nofile"]
        # An explicit --ulimit replaces containers.conf's defaults: give nproc too (runc cannot raise it here).
        self.ulimits = ["--ulimit", f"nofile={podman['nofile']}:{podman['nofile']}",
                        "--ulimit", f"nproc={podman['nproc']}:{podman['nproc']}"]
        self.name = f"r2acc{os.getpid()}"
        self.net = f"{self.name}-net"
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.containers: list[str] = []

    def node(self, role: str, command: list[str], ports: list[str] = ()) -> str:
        name = f"{self.name}-{role}"
        # The network's DNS answers to container names and aliases, not to --hostname: alias it.
        cmd = ["podman", "run", "-d", "--name", name, "--hostname", f"r2ac-{role}", "--network", self.net,
               "--network-alias", f"r2ac-{role}",
               "--init", "--shm-size", "1g", *self.ulimits,
               "-e", "RAY_AUTH_MODE=token", "-e", f"RAY_AUTH_TOKEN={self.token}",
               "-e", "RAY_USAGE_STATS_ENABLED=0", "-v", f"{self.runs}:/opt/r2ac/runs"]
        for p in ports:
            cmd += ["-p", p]
        self.containers.append(name)
        run([*cmd, self.image, *command], self.env, timeout=120, what=f"starting {name}")
        return name

    def start(self) -> None:
        run(["podman", "network", "create", self.net], self.env, timeout=60, what="podman network create")
        # The head offers 1 CPU and the `learner` resource: the learner goes there, every actor elsewhere.
        self.node("head", ["ray", "start", "--head", "--port=6379", "--num-cpus=1",
                           '--resources={"learner": 1}', "--dashboard-host=0.0.0.0", "--disable-usage-stats",
                           "--block"], ports=[f"127.0.0.1:{self.port}:8265"])
        self.worker("node2")
        self.wait_nodes(2)

    def worker(self, role: str) -> str:
        # As the compose services do: wait for the head's health URL, join by its address (docker/wait_for.py).
        return self.node(role, ["bash", "-c", "HEAD=$(python docker/wait_for.py --resolve r2ac-head r2ac-head:6379 "
                                              "http://r2ac-head:8265/api/gcs_healthz) && exec ray start "
                                              "--address=$HEAD:6379 --num-cpus=2 --disable-usage-stats --block"])

    def wait_nodes(self, n: int, timeout: float = 300) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = subprocess.run(["podman", "exec", f"{self.name}-head", "ray", "status"], env=self.env,
                                 capture_output=True, text=True)
            active = out.stdout.split("Pending:")[0]
            if len(re.findall(r"^\s*1 node_", active, re.M)) >= n:
                return
            time.sleep(2)
        pytest.fail(f"the cluster did not reach {n} nodes in {timeout:.0f} s:\n"
                    f"{out.stdout[-2000:]}{out.stderr[-2000:]}")

    def ray_cli(self, *args: str, token: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        ray = str(Path(sys.executable).parent / "ray")
        env = {**self.env, "RAY_AUTH_TOKEN": token or self.token, "RAY_AUTH_MODE": "token"}
        return run([ray, *args], env, timeout=timeout, check=False)

    def submit(self, entry_args: list[str], sid: str) -> None:
        out = self.ray_cli("job", "submit", "--address", f"http://127.0.0.1:{self.port}", "--submission-id", sid,
                           "--no-wait", "--", "python", "/opt/r2ac/deploy/job_entry.py", *entry_args)
        assert out.returncode == 0, out.stdout + out.stderr

    def job_status(self, sid: str) -> str:
        out = self.ray_cli("job", "status", "--address", f"http://127.0.0.1:{self.port}", sid)
        text = (out.stdout + out.stderr).upper()
        for s in ("SUCCEEDED", "FAILED", "STOPPED", "RUNNING", "PENDING"):
            if s in text:
                return s
        return "UNKNOWN: " + text[-300:]

    def wait_job(self, sid: str, timeout: float = 1500) -> str:
        deadline = time.time() + timeout
        status = "PENDING"
        while time.time() < deadline:
            status = self.job_status(sid)
            if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                return status
            time.sleep(3)
        pytest.fail(f"job {sid} still {status} after {timeout:.0f} s")

    def job_logs(self, sid: str) -> str:
        out = self.ray_cli("job", "logs", "--address", f"http://127.0.0.1:{self.port}", sid)
        return out.stdout + out.stderr

    def remove(self) -> list[str]:
        left = []
        for c in self.containers:
            if subprocess.run(["podman", "container", "exists", c], env=self.env).returncode == 0:
                left.append(c)
                subprocess.run(["podman", "rm", "-f", "-t", "5", c], env=self.env, capture_output=True)
        if subprocess.run(["podman", "network", "exists", self.net], env=self.env).returncode == 0:
            subprocess.run(["podman", "network", "rm", "-f", self.net], env=self.env, capture_output=True)
        return left


@contextlib.contextmanager
def cluster_up(c: Cluster):
    """``c`` started; its containers and network are removed when the block ends, also when it fails."""
    try:
        t0 = time.time()
        c.start()
        TIMINGS.setdefault("cluster_start_s", time.time() - t0)
        yield c
    finally:
        c.remove()


def cluster_left(c: Cluster) -> list[str]:
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], env=c.env, capture_output=True,
                           text=True).stdout.split()
    nets = subprocess.run(["podman", "network", "ls", "--format", "{{.Name}}"], env=c.env, capture_output=True,
                          text=True).stdout.split()
    return [n for n in names + nets if n.startswith(c.name)]


@pytest.fixture
def cluster(podman, image):
    c = Cluster(podman, image, host_runs(podman, "runs-cluster"))
    with cluster_up(c):
        yield c
    assert not cluster_left(c)


def test_a_cluster_that_fails_to_start_leaves_no_containers_or_networks(podman, image, monkeypatch):
    """The second node never joins (here: the wait for it fails at once): the test fails, and the head, the
    worker and the network it had made are gone."""
    def never(self, n, timeout=300):
        pytest.fail(f"the cluster did not reach {n} nodes (simulated)")

    monkeypatch.setattr(Cluster, "wait_nodes", never)
    c = Cluster(podman, image, host_runs(podman, "runs-failed"))
    with pytest.raises(pytest.fail.Exception, match="simulated"), cluster_up(c):
        pass
    assert c.containers, "the head and a worker were started before the failure"
    assert not cluster_left(c), cluster_left(c)


def test_two_node_job_survives_losing_its_worker_node_and_resumes(cluster):
    """`ray job submit` from the host (token auth) onto a head + worker-node cluster: every actor runs on
    the second node, the learner on the head. The second node is killed mid-run and a new one joins:
    the run goes on to the end. Then the finished run is resumed for more steps, nothing lost."""
    # A wrong token is refused, with Ray's message naming the token.
    bad = cluster.ray_cli("job", "list", "--address", f"http://127.0.0.1:{cluster.port}", token="0" * 32)
    assert bad.returncode != 0 and re.search(r"token|auth|401|403", bad.stdout + bad.stderr, re.I), \
        bad.stdout[-1000:] + bad.stderr[-1000:]

    # A driver (`r2ac train --address`) with a wrong token: one line naming the token, no traceback.
    drv = subprocess.run(["podman", "exec", "-e", "RAY_AUTH_TOKEN=" + "0" * 32, f"{cluster.name}-head", "r2ac",
                          "train", "configs/quickstart.yaml", "runtime.kind=ray", "run_dir=/tmp/wrong-token",
                          "--address", "r2ac-head:6379"], env=cluster.env, capture_output=True, text=True,
                         timeout=300)
    last = drv.stderr.strip().splitlines()[-1] if drv.stderr.strip() else ""
    assert drv.returncode == 2 and "Traceback" not in drv.stderr, drv.stderr[-3000:]
    assert last.startswith("r2ac train: error: the Ray cluster at r2ac-head:6379 refused this driver") and \
        "RAY_AUTH_TOKEN" in last, drv.stderr[-3000:]

    run_dir = "/opt/r2ac/runs/job"  # absolute, on the volume every node mounts
    host_dir = cluster.runs / "job"
    t0 = time.time()
    cluster.submit(["configs/quickstart.yaml", f"run_dir={run_dir}", "runtime.num_actors=2",
                    *[a.replace("16000", str(JOB_STEPS)) for a in TRAIN_ARGS]], "r2ac-test-1")
    # Mid-run (a few metric rows in), kill the worker node; start a fresh one. The run directory is watched
    # twice a second; `ray job status` (a Ray CLI start each time: seconds, a minute on a loaded machine)
    # only every 30 s, or the run can end between two looks.
    deadline = time.time() + 600
    next_status = time.time() + 30
    while True:
        rows = (host_dir / "metrics.csv").read_text().splitlines() if (host_dir / "metrics.csv").exists() else []
        if len(rows) >= 3:
            break
        if time.time() > deadline:
            pytest.fail("the job wrote no metrics in 600 s:\n" + cluster.job_logs("r2ac-test-1")[-3000:])
        if time.time() >= next_status:
            status = cluster.job_status("r2ac-test-1")
            assert status in ("PENDING", "RUNNING"), f"job {status} before the node was killed:\n" + \
                cluster.job_logs("r2ac-test-1")[-3000:]
            next_status = time.time() + 30
        time.sleep(0.5)
    rows_at_kill = len((host_dir / "metrics.csv").read_text().splitlines())
    run(["podman", "kill", f"{cluster.name}-node2"], cluster.env, timeout=60, what="killing node2")
    t_kill = time.time()
    if (host_dir / "summary.json").exists():  # written when the run ends
        done = json.loads((host_dir / "summary.json").read_text())
        if done.get("status") != "running":
            pytest.fail(f"the job ended ({done.get('status')}, step {done.get('step')}) before node2 was killed: "
                        f"raise JOB_STEPS")
    status_at_kill = cluster.job_status("r2ac-test-1")
    cluster.worker("node3")
    status = cluster.wait_job("r2ac-test-1")
    TIMINGS["two_node_job_s"] = time.time() - t0
    logs = cluster.job_logs("r2ac-test-1")
    assert status == "SUCCEEDED", logs[-4000:]
    events = (host_dir / "events.log").read_text()
    summary = json.loads((host_dir / "summary.json").read_text())
    keys = ("step", "actor_nodes", "node_hosts", "actor_failures", "lost_rollouts")
    where = (f"node2 killed {t_kill - t0:.0f} s after submit with {rows_at_kill} metrics rows, job then "
             f"{status_at_kill}; summary "
             f"{json.dumps({k: summary.get(k) for k in keys})}; "
             f"events:\n{events[-3000:]}")
    say(where.split(";")[0])
    assert re.search(rf"\[train\] step [\d,]+/{JOB_STEPS:,} .* frames/s", logs), logs[-3000:]  # progress in job logs
    summary = check_run_dir(host_dir, min_step=JOB_STEPS)
    hosts = summary["node_hosts"]
    assert hosts[summary["learner_node"]] == "r2ac-head", summary
    for i, nodes in summary["actor_nodes"].items():
        assert hosts[nodes[0]] == "r2ac-node2", (i, where)  # all actors on the second node
        assert hosts[nodes[-1]] == "r2ac-node3", (i, where)  # restarted on the node that replaced it
    assert summary["actor_failures"] >= 1, where
    assert "actor placement: node" in events and "now runs on node" in events, where
    say(f"two-node job: {summary['step']} steps, node2 killed at {t_kill - t0:.0f} s, "
        f"actors moved to node3; {TIMINGS['two_node_job_s']:.0f} s in all")

    # Resume the finished run for more steps, as a job user would (README/docs: job_entry.py --resume).
    rows_before = len((host_dir / "metrics.csv").read_text().splitlines())
    t1 = time.time()
    cluster.submit(["--resume", run_dir, f"total_steps={JOB_STEPS + 16000}"], "r2ac-test-2")
    status = cluster.wait_job("r2ac-test-2")
    TIMINGS["resume_job_s"] = time.time() - t1
    assert status == "SUCCEEDED", cluster.job_logs("r2ac-test-2")[-4000:]
    summary2 = check_run_dir(host_dir, min_step=JOB_STEPS + 16000)
    assert summary2["updates"] > summary["updates"], (summary, summary2)
    steps = [int(line.split(",")[0]) for line in (host_dir / "metrics.csv").read_text().splitlines()[1:]]
    assert len(steps) > rows_before - 1 and steps == sorted(steps), steps


# --------------------------------------------------------------------------- ray up, provider: local


def test_ray_up_local_provider_over_ssh_and_ray_submit(podman, image):
    """deploy/local-cluster.yaml with `ray up` from the host against two containers that run sshd (the
    image's user r2ac, key auth): the launcher starts the head over SSH, the head's autoscaler starts the
    second node over SSH, `ray submit` runs deploy/job_entry.py there (token auth from file_mounts), and
    `ray down` stops Ray on both."""
    for tool in ("ssh", "ssh-keygen", "rsync"):
        if shutil.which(tool) is None:
            pytest.skip(f"`ray up` needs {tool} on this host (apt-get install -y openssh-client rsync)")
    env = dict(podman["env"])
    work = podman["work"] / "rayup"
    work.mkdir()
    key = work / "id_ed25519"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], env, timeout=60, what="ssh-keygen")
    token = work / "auth_token"
    token.write_text(secrets.token_hex(16) + "\n")
    token.chmod(0o600)
    runs = host_runs(podman, "runs-rayup")
    name = f"r2acu{os.getpid()}"
    net = f"{name}-net"
    nofile = podman["nofile"]
    containers: list[str] = []
    # sshd as root in the container (the user logs in as r2ac); pam_loginuid cannot be written in a container.
    sshd = ("sed -i 's/^session\\s*required\\s*pam_loginuid.so/session optional pam_loginuid.so/' /etc/pam.d/sshd"
            " && mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e")
    ray_bin = str(Path(sys.executable).parent / "ray")
    # The launcher keeps its own state under /tmp/ray and ~: a HOME of our own keeps the host's untouched.
    henv = {**env, "HOME": str(work), "RAY_USAGE_STATS_ENABLED": "0"}
    cfg = work / "local-cluster.yaml"
    t0 = time.time()
    try:
        run(["podman", "network", "create", net], env, timeout=60, what="podman network create")
        ips = []
        for role in ("head", "node2"):
            c = f"{name}-{role}"
            containers.append(c)
            run(["podman", "run", "-d", "--name", c, "--hostname", f"r2ac-{role}", "--network", net, "--init",
                 "--user", "0", "--shm-size", "1g", "--ulimit", f"nofile={nofile}:{nofile}",
                 "--ulimit", f"nproc={podman['nproc']}:{podman['nproc']}",
                 "-v", f"{key}.pub:/home/r2ac/.ssh/authorized_keys:ro", "-v", f"{runs}:/opt/r2ac/runs",
                 image, "bash", "-c", sshd], env, timeout=120, what=f"starting {c}")
            out = run(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c],
                      env, timeout=60, what="podman inspect")
            ips.append(out.stdout.strip())
        text = (ROOT / "deploy" / "local-cluster.yaml").read_text()
        text = re.sub(r"head_ip: \S+", f"head_ip: {ips[0]}", text)
        text = re.sub(r"worker_ips: \[[^\]]*\]", f"worker_ips: [{ips[1]}]", text)
        text = text.replace("ssh_private_key: ~/.ssh/r2ac_cluster", f"ssh_private_key: {key}")
        text = text.replace('"~/.ray/auth_token": "~/.ray/auth_token"', f'"~/.ray/auth_token": "{token}"')
        text = text.replace("cluster_name: r2ac-local", f"cluster_name: {name}")
        cfg.write_text(text)
        up = run([ray_bin, "up", "-y", "--no-config-cache", str(cfg)], henv, timeout=900, nice=True,
                 what="ray up deploy/local-cluster.yaml")
        TIMINGS["ray_up_s"] = time.time() - t0
        # The head's autoscaler starts node2 over SSH; wait until both nodes are in the cluster.
        deadline = time.time() + 600
        status = ""
        while time.time() < deadline:
            out = subprocess.run(["podman", "exec", "-u", "r2ac", f"{name}-head", "bash", "-lc",
                                  "RAY_AUTH_MODE=token ray status"], env=env, capture_output=True, text=True)
            status = out.stdout + out.stderr
            # The launcher's nodes show up by node type ("1 local.cluster.node"), active or idle.
            nodes = re.findall(r"^\s*(\d+) (?:node_\S+|local\.cluster\.node)", status.split("Pending:")[0], re.M)
            if sum(int(n) for n in nodes) >= 2:
                break
            time.sleep(3)
        else:
            pytest.fail(f"`ray up`: node2 did not join within 600 s:\n{status[-2000:]}\n{up.stdout[-2000:]}")
        TIMINGS["ray_up_two_nodes_s"] = time.time() - t0
        t1 = time.time()
        sub = run([ray_bin, "submit", str(cfg), str(ROOT / "deploy" / "job_entry.py"), "--",
                   "configs/quickstart.yaml", "run_dir=/opt/r2ac/runs/rayup", "runtime.num_actors=2",
                   *[a.replace("16000", "8000") for a in TRAIN_ARGS]], henv, timeout=900,
                  what="ray submit deploy/job_entry.py")
        TIMINGS["ray_submit_s"] = time.time() - t1
        # (`ray submit` runs the driver under `ssh -tt`, a terminal: a bar there, not status lines.)
        assert "Connected to Ray cluster" in sub.stdout + sub.stderr, sub.stdout[-3000:]
        summary = check_run_dir(runs / "rayup", min_step=8000)
        hosts = summary["node_hosts"]
        assert hosts[summary["learner_node"]] == "r2ac-head", summary
        assert {hosts[n[-1]] for n in summary["actor_nodes"].values()} == {"r2ac-node2"}, summary
        run([ray_bin, "down", "-y", str(cfg)], henv, timeout=300, what="ray down")
        out = subprocess.run(["podman", "exec", f"{name}-head", "pgrep", "-f", "gcs_server"], env=env,
                             capture_output=True, text=True)
        assert out.returncode != 0, "ray down left the head's GCS running"
        say(f"ray up: head + node2 in {TIMINGS['ray_up_two_nodes_s']:.0f} s, ray submit "
            f"{TIMINGS['ray_submit_s']:.0f} s ({summary['step']} steps, actors on r2ac-node2)")
    finally:
        for c in containers:
            subprocess.run(["podman", "rm", "-f", "-t", "5", c], env=env, capture_output=True)
        subprocess.run(["podman", "network", "rm", "-f", net], env=env, capture_output=True)


def test_zz_report_timings():
    """Print the timings this run measured (docs/deployment.md quotes them with the command)."""
    if TIMINGS:
        say("timings: " + ", ".join(f"{k}={v:.0f}" for k, v in TIMINGS.items()))
