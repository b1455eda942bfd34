# syntax=docker/dockerfile:1.7
#
# The r2ac image: every Ray node (head, CPU actor workers, the learner) and the
# training driver. One file for all roles; what differs is a build argument:
#
#   CPU torch (actors, head, CPU learner; the default):
#     docker build -f docker/r2ac.Dockerfile -t r2ac/r2ac:0.1.0 .
#   CUDA torch (the GPU learner node): PyPI's torch wheel is the CUDA build
#     docker build -f docker/r2ac.Dockerfile --build-arg TORCH_INDEX_URL=https://pypi.org/simple \
#       -t r2ac/r2ac:0.1.0-cuda .
#
# Targets:
#   base   r2ac, Ray, torch, Atari, ProcGen, W&B; no DeepMind Lab
#   r2ac   (the default, last stage) base + DeepMind Lab, installed from the wheel image
#          DMLAB_WHEEL_IMAGE (docker/dmlab.Dockerfile builds it: from source, or from a
#          wheel built before); without that image, build `--target base`.
#
# Build arguments that say where things come from (all have defaults for a host
# with internet access):
#   PYTHON_IMAGE       a Debian bookworm image with python3 3.11 (python:3.11-slim-bookworm;
#                      docker/podman/base-image.sh makes one without a registry)
#   TORCH_INDEX_URL    the index torch comes from (PyTorch's CPU index by default)
#   TORCH_FIND_LINKS   a folder with a torch wheel instead (no index used for torch); mount it
#                      into the build: podman build -v DIR:DIR:ro --build-arg TORCH_FIND_LINKS=DIR
#   DMLAB_WHEEL_IMAGE  an image holding deepmind_lab-*.whl under /dmlab/
#
# Build from the repository root (the context must be the repo root; /.dockerignore
# keeps it small). docs/deployment.md has the podman commands used on the project's
# machines and `make test-cluster` builds it that way.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG DMLAB_WHEEL_IMAGE=r2ac/dmlab-wheel:lab-b1db91a

# ---------------------------------------------------------------------------------
FROM ${DMLAB_WHEEL_IMAGE} AS dmlab-wheel

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS base

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_FIND_LINKS=""
ARG R2AC_EXTRAS=atari,procgen,wandb

LABEL org.opencontainers.image.title="r2ac" \
      org.opencontainers.image.description="r2ac Ray node and training driver (actors, learner, head)" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH} \
    HOME=/home/r2ac \
    R2AC_HOME=/opt/r2ac \
    RAY_USAGE_STATS_ENABLED=0 \
    WANDB_MODE=offline \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# python3-venv: the Debian-based base images need it for `python3 -m venv` (the
# python:* images have venv built in; installing it there is harmless).
# openssh-client, openssh-server and rsync: Ray's cluster launcher syncs files into
# the head over SSH and its autoscaler reaches other nodes over SSH (the `local`
# provider, deploy/local-cluster.yaml, logs into the containers themselves; sshd is
# installed, never started unless a node's command starts it).
# Not version-pinned: Debian's archive drops superseded point releases, which would
# break a pinned install; the Debian release is fixed by PYTHON_IMAGE.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates openssh-client openssh-server rsync procps \
    && if ! python3 -c "import ensurepip" 2>/dev/null; then \
         apt-get install -y --no-install-recommends python3-venv; fi \
    && rm -rf /var/lib/apt/lists/*

# A fixed non-root user (UID 1000, the default user on common cloud images, so that
# host directories mounted into the containers can be made writable for it). It owns
# the virtualenv so that `pip install -e` of a mounted checkout works on a cluster.
RUN groupadd --gid 1000 r2ac \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash r2ac \
    && python3 -m venv /opt/venv \
    && chown -R 1000:1000 /opt/venv \
    && install -d -o 1000 -g 1000 /opt/r2ac /opt/r2ac/runs /home/r2ac/.ray

USER 1000:1000
WORKDIR /opt/r2ac

# torch first, from its own source, so that nothing pulls another build from PyPI.
RUN if [ -n "${TORCH_FIND_LINKS}" ]; then \
      pip install --no-index --find-links "${TORCH_FIND_LINKS}" "torch==${TORCH_VERSION}" \
      || pip install --find-links "${TORCH_FIND_LINKS}" "torch==${TORCH_VERSION}"; \
    else \
      pip install --index-url "${TORCH_INDEX_URL}" --extra-index-url https://pypi.org/simple "torch==${TORCH_VERSION}"; \
    fi

# Pinned dependencies in their own layer: code changes do not reinstall them.
COPY --chown=1000:1000 docker/requirements.txt /opt/r2ac/docker/requirements.txt
RUN pip install -r /opt/r2ac/docker/requirements.txt

COPY --chown=1000:1000 pyproject.toml README.md /opt/r2ac/
COPY --chown=1000:1000 r2ac /opt/r2ac/r2ac
RUN pip install -r /opt/r2ac/docker/requirements.txt "/opt/r2ac[${R2AC_EXTRAS}]" \
    && pip check \
    && rm -rf /opt/r2ac/build /opt/r2ac/r2ac.egg-info \
    && python -c "import r2ac, ray, torch; print('r2ac', r2ac.__version__, 'ray', ray.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"

COPY --chown=1000:1000 configs /opt/r2ac/configs
COPY --chown=1000:1000 deploy /opt/r2ac/deploy
COPY --chown=1000:1000 docker/wait_for.py /opt/r2ac/docker/wait_for.py
# SSH logins (Ray's cluster launcher, `provider: local`) do not see ENV: the same settings for login shells.
COPY docker/login-env.sh /etc/profile.d/r2ac.sh

# Ray: 6379 GCS, 8265 dashboard / job API, 10001 Ray client. Publish none of them
# beyond localhost (docker-compose.yml binds the dashboard to 127.0.0.1).
EXPOSE 6379 8265 10001

# No ENTRYPOINT: Ray's cluster launcher starts the container with `bash` and runs
# its own commands in it; docker-compose.yml gives each service its command.
CMD ["bash"]

# ---------------------------------------------------------------------------------
# base + DeepMind Lab (the default target). The wheel is bind-mounted from
# DMLAB_WHEEL_IMAGE, never copied into a layer.
FROM base AS r2ac

USER 0:0
# The libraries DeepMind Lab loads at run time (OSMesa: headless software rendering).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libosmesa6 libsdl2-2.0-0 liblua5.1-0 libjpeg62-turbo libpng16-16 \
        libglib2.0-0 libxml2 zlib1g \
    && rm -rf /var/lib/apt/lists/*
USER 1000:1000

# The wheel asks for numpy and six only; numpy stays the pinned one (--no-deps), and
# its __init__ imports dm_env.
RUN --mount=type=bind,from=dmlab-wheel,source=/dmlab,target=/tmp/dmlab \
    pip install "$(grep "^numpy==" /opt/r2ac/docker/requirements.txt)" six==1.17.0 dm-env==1.6 \
    && pip install --no-deps /tmp/dmlab/deepmind_lab-*.whl \
    && pip check \
    && python -c "import deepmind_lab; print('deepmind_lab', deepmind_lab.__file__)"
