# syntax=docker/dockerfile:1.7
#
# r2ac actor image (CPU): Ray head and worker nodes that run the actors, and the
# training driver. torch (CPU build), r2ac with the atari, procgen and wandb extras,
# and DeepMind Lab from the wheel built once by docker/dmlab.Dockerfile.
#
# Build from the repository root (the build context must be the repo root):
#   docker build -f docker/dmlab.Dockerfile -t r2ac/dmlab-wheel:lab-e85baf1 .
#   docker build -f docker/actor.Dockerfile -t r2ac/actor:0.1.0 .
# or: docker compose -f docker/docker-compose.yml build   (see docs/deployment.md)

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG DMLAB_WHEEL_IMAGE=r2ac/dmlab-wheel:lab-e85baf1

# The DeepMind Lab wheel, built once; bind-mounted below, never copied into a layer.
FROM ${DMLAB_WHEEL_IMAGE} AS dmlab

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS actor

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG R2AC_EXTRAS=atari,procgen,wandb

LABEL org.opencontainers.image.title="r2ac-actor" \
      org.opencontainers.image.description="r2ac Ray node (CPU actors, head, driver) with DeepMind Lab" \
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
    WANDB_MODE=offline

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Runtime libraries of DeepMind Lab's headless renderers (OSMesa for software
# rendering, EGL/GL for hardware) and SDL2, which its engine links against.
# openssh-client and rsync: Ray's cluster launcher syncs files into the container
# with rsync, and the autoscaler on the head node reaches new nodes over SSH.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libegl1=1.6.0-1 \
        libgl1=1.6.0-1 \
        libosmesa6=22.3.6-1+deb12u2 \
        libsdl2-2.0-0=2.26.5+dfsg-1 \
        openssh-client=1:9.2p1-2+deb12u10 \
        rsync=3.5.0+ds1-0+deb12u1 \
    && rm -rf /var/lib/apt/lists/*

# A fixed non-root user (UID 1000, the default user on common cloud images, so that
# files Ray's cluster launcher mounts from the host are readable). It owns the
# virtualenv so that `pip install -e` of a mounted checkout works on a cluster.
RUN groupadd --gid 1000 r2ac \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash r2ac \
    && python3 -m venv /opt/venv \
    && chown -R 1000:1000 /opt/venv \
    && install -d -o 1000 -g 1000 /opt/r2ac /opt/r2ac/runs /home/r2ac/.ray

USER 1000:1000
WORKDIR /opt/r2ac

# torch first, from the CPU index, so that nothing pulls the CUDA build from PyPI.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"

# Pinned dependencies in their own layer: code changes do not reinstall them.
COPY --chown=1000:1000 docker/requirements.txt /opt/r2ac/docker/requirements.txt
RUN pip install -r /opt/r2ac/docker/requirements.txt

RUN --mount=type=bind,from=dmlab,source=/dmlab,target=/tmp/dmlab \
    pip install -r /opt/r2ac/docker/requirements.txt /tmp/dmlab/*.whl

COPY --chown=1000:1000 pyproject.toml README.md /opt/r2ac/
COPY --chown=1000:1000 r2ac /opt/r2ac/r2ac
RUN pip install -r /opt/r2ac/docker/requirements.txt "/opt/r2ac[${R2AC_EXTRAS}]" \
    && pip check \
    && rm -rf /opt/r2ac/build /opt/r2ac/r2ac.egg-info \
    && python -c "import deepmind_lab, r2ac, ray, torch; print('r2ac', r2ac.__version__, 'ray', ray.__version__, 'torch', torch.__version__)"

COPY --chown=1000:1000 configs /opt/r2ac/configs
COPY --chown=1000:1000 deploy /opt/r2ac/deploy

# Ray: 6379 GCS, 8265 dashboard / job API, 10001 Ray client. Publish none of them
# beyond localhost (docker-compose.yml binds the dashboard to 127.0.0.1).
EXPOSE 6379 8265 10001

# No ENTRYPOINT: Ray's cluster launcher starts the container with `bash` and runs
# its own commands in it; docker-compose.yml gives each service its command.
CMD ["bash"]
