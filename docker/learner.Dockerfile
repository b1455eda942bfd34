# syntax=docker/dockerfile:1.7
#
# r2ac learner image (GPU): the Ray node that hosts the learner. torch (CUDA build),
# r2ac with the atari, procgen and wandb extras, and DeepMind Lab from the wheel
# built once by docker/dmlab.Dockerfile.
#
# Build from the repository root:
#   docker build -f docker/dmlab.Dockerfile -t r2ac/dmlab-wheel:lab-e85baf1 .
#   docker build -f docker/learner.Dockerfile -t r2ac/learner:0.1.0 .
#
# Base image. This uses the same python:3.11 bookworm base as the actor image and
# takes CUDA from the torch wheel, rather than a pytorch/pytorch or nvidia/cuda
# base, for three reasons: every node of a Ray cluster must run the same Python
# version (the pytorch/pytorch images carry their own conda Python); actors and
# learner exchange weights and trajectories, so they should run the same torch
# release (2.13.0 here, CPU build there, CUDA build here); and the one DeepMind Lab
# wheel is compiled for this CPython and glibc. The CUDA user-space libraries
# (cuBLAS, cuDNN, NCCL, ...) arrive as pinned nvidia-* / cuda-toolkit wheels that
# torch depends on; the host provides only the NVIDIA driver, through the NVIDIA
# Container Toolkit (`--gpus all`, or `gpus:` / device reservations in compose).
#
# CUDA version. torch 2.13.0 on PyPI is built for CUDA 13.0 and needs an NVIDIA
# driver of the 580 series or newer. For an older driver, build with a PyTorch
# index of an older CUDA, if it publishes 2.13.0 for it, e.g.
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG DMLAB_WHEEL_IMAGE=r2ac/dmlab-wheel:lab-e85baf1

FROM ${DMLAB_WHEEL_IMAGE} AS dmlab

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS learner

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://pypi.org/simple
ARG R2AC_EXTRAS=atari,procgen,wandb

LABEL org.opencontainers.image.title="r2ac-learner" \
      org.opencontainers.image.description="r2ac Ray node for the GPU learner (CUDA torch) with DeepMind Lab" \
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
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Same runtime libraries as the actor image (see docker/actor.Dockerfile).
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libegl1=1.6.0-1 \
        libgl1=1.6.0-1 \
        libosmesa6=22.3.6-1+deb12u2 \
        libsdl2-2.0-0=2.26.5+dfsg-1 \
        openssh-client=1:9.2p1-2+deb12u10 \
        rsync=3.5.0+ds1-0+deb12u1 \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 1000 r2ac \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash r2ac \
    && python3 -m venv /opt/venv \
    && chown -R 1000:1000 /opt/venv \
    && install -d -o 1000 -g 1000 /opt/r2ac /opt/r2ac/runs /home/r2ac/.ray

USER 1000:1000
WORKDIR /opt/r2ac

# The CUDA build of torch, first, so the requirements below find it satisfied.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"

COPY --chown=1000:1000 docker/requirements.txt /opt/r2ac/docker/requirements.txt
RUN pip install -r /opt/r2ac/docker/requirements.txt

RUN --mount=type=bind,from=dmlab,source=/dmlab,target=/tmp/dmlab \
    pip install -r /opt/r2ac/docker/requirements.txt /tmp/dmlab/*.whl

COPY --chown=1000:1000 pyproject.toml README.md /opt/r2ac/
COPY --chown=1000:1000 r2ac /opt/r2ac/r2ac
RUN pip install -r /opt/r2ac/docker/requirements.txt "/opt/r2ac[${R2AC_EXTRAS}]" \
    && pip check \
    && rm -rf /opt/r2ac/build /opt/r2ac/r2ac.egg-info \
    && python -c "import deepmind_lab, r2ac, ray, torch; print('r2ac', r2ac.__version__, 'ray', ray.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"

COPY --chown=1000:1000 configs /opt/r2ac/configs
COPY --chown=1000:1000 deploy /opt/r2ac/deploy

EXPOSE 6379 8265 10001

CMD ["bash"]
