# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
EXTRAS ?= atari,procgen,wandb,popgym,minigrid,mujoco,dev
# The CPU build of torch on these machines; GPU users: TORCH_SPEC="torch==2.13.0" with their index.
TORCH_SPEC ?= torch==2.13.0
RUN_CONFIG ?= configs/quickstart.yaml
RUN_DIR    ?= runs/quickstart

.PHONY: install run test bench-core lint clean gpu-check

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/r2ac train $(RUN_CONFIG) run_dir=$(RUN_DIR)

test: install
	$(VENV)/bin/pytest -q -p no:cacheprovider

bench-core: install
	$(VENV)/bin/r2ac bench core

# On a machine with an NVIDIA GPU and a CUDA build of torch (TORCH_SPEC with its index): the CUDA tests, the core
# benchmark on GPU and CPU, RTRL on the pixel cue with the learner on the GPU, the Ray runtime's and the sweep's
# GPU tests, and Breakout on Ray with the learner on the GPU (docs/results.md, "On a GPU"; CHECKS="..." picks steps)
GPU_CHECK_DIR ?= runs/gpu_check
gpu-check: install
	PYTHON=$(PY) tools/gpu_check.sh $(GPU_CHECK_DIR)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/hadolint docker/*.Dockerfile

clean:
	rm -rf $(VENV) *.egg-info

# DeepMind Lab (optional): `make dmlab DMLAB_WHEEL=path/to/deepmind_lab-1.0-py3-none-any.whl` installs a
# wheel into the venv; without DMLAB_WHEEL, tools/build_dmlab.sh builds one from source (Bazel, ~3 GB).
.PHONY: dmlab
dmlab: install
	DMLAB_WHEEL="$(DMLAB_WHEEL)" PYTHON=$(PY) tools/install_dmlab.sh

# Containers where users run them (docs/deployment.md): installs podman if it can (Debian, root), builds
# docker/r2ac.Dockerfile, runs docker/docker-compose.yml to a finished training and a two-node Ray cluster
# (job submit, node loss, resume). DMLAB_WHEEL=path also builds the DeepMind Lab target.
# CLUSTER_SETUP (docker/podman/setup-host.sh) exits 3 with one line when containers cannot run here: that is a
# skip (exit 0, the line printed); any other failure of it, or of the tests, fails the target.
CLUSTER_SETUP ?= docker/podman/setup-host.sh
.PHONY: test-cluster
test-cluster: install
	@why=$$($(CLUSTER_SETUP)); rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "make test-cluster: skipped: $$why"; exit 0; fi; \
	if [ $$rc -ne 0 ]; then echo "make test-cluster: failed: $(CLUSTER_SETUP) exited $$rc: $$why" >&2; exit $$rc; fi; \
	R2AC_CLUSTER_TEST=1 $(VENV)/bin/pytest -q -s -rs -p no:cacheprovider tests/test_cluster.py
