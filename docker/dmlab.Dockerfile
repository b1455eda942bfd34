# syntax=docker/dockerfile:1.7
#
# DeepMind Lab, compiled from source with Bazel into a Python wheel.
#
# DeepMind Lab publishes no wheel, so this file builds one, once, and the actor and
# learner images install it from this image (`FROM r2ac/dmlab-wheel:... AS dmlab`
# and a bind mount there). The final stage holds nothing but the wheel, so it can be
# pushed to a registry and reused.
#
#   docker build -f docker/dmlab.Dockerfile -t r2ac/dmlab-wheel:lab-e85baf1 .
#   (or: docker compose -f docker/docker-compose.yml --profile build build dmlab-wheel)
#
# The procedure is DeepMind Lab's documented one (python/pip_package/README.md):
#   bazel build -c opt --python_version=PY3 //python/pip_package:build_pip_package
#   ./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg
# with three pins, because the repository's WORKSPACE fetches several dependencies
# from moving `master` archives and names no Bazel version:
#   * DeepMind Lab itself at a fixed commit (DMLAB_COMMIT);
#   * Bazel 7.6.1 (BAZEL_VERSION), a WORKSPACE-capable release, run with
#     --noenable_bzlmod --enable_workspace;
#   * Abseil at the LTS tag 20230125.3 (ABSEIL_TAG), swapped in for the
#     repository's abseil-cpp master archive with --override_repository.
# This combination is the one reported to build in google-deepmind/lab issue #258.
# It has NOT been built on the machines r2ac is developed on (no Docker engine
# there); if a moving dependency breaks it, pin that one the same way
# (DMLAB_BAZEL_EXTRA_FLAGS="--override_repository=NAME=/path").
#
# The wheel is built against the same CPython (3.11, Debian bookworm) and the same
# NumPy (1.26.4, C ABI 1.x) that the runtime images use; a module compiled against
# NumPy 1.x does not import under NumPy 2.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build

ARG BAZEL_VERSION=7.6.1
ARG DMLAB_REPO=https://github.com/google-deepmind/lab.git
ARG DMLAB_COMMIT=e85baf15419a86e9a4c1ff532f15c0fdaf6c7966
ARG ABSEIL_REPO=https://github.com/abseil/abseil-cpp.git
ARG ABSEIL_TAG=20230125.3
ARG DMLAB_BAZEL_EXTRA_FLAGS=""

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Build dependencies named in DeepMind Lab's build docs (compiler, gettext for glib,
# SDL2, OSMesa and EGL/GL headers, zip for the asset genrules), pkg-config and
# zlib headers for the bundled third-party configure steps, plus git and curl to
# fetch sources. Versions are Debian bookworm's.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential=12.9 \
        curl=7.88.1-10+deb12u15 \
        freeglut3-dev=3.4.0-1 \
        gettext=0.21-12 \
        git=1:2.39.5-0+deb12u3 \
        libegl-dev=1.6.0-1 \
        libffi-dev=3.4.4-1 \
        libgl-dev=1.6.0-1 \
        libglu1-mesa-dev=9.0.2-1.1 \
        libosmesa6-dev=22.3.6-1+deb12u2 \
        libsdl2-dev=2.26.5+dfsg-1 \
        pkg-config=1.8.1-1 \
        unzip=6.0-28+deb12u1 \
        zip=3.0-13+deb12u1 \
        zlib1g-dev=1:1.2.13.dfsg-1 \
    && rm -rf /var/lib/apt/lists/*

# Bazel as a single pinned binary, checked against the checksum file published
# beside it in the release.
RUN curl -fsSL -o /usr/local/bin/bazel \
        "https://github.com/bazelbuild/bazel/releases/download/${BAZEL_VERSION}/bazel-${BAZEL_VERSION}-linux-x86_64" \
    && curl -fsSL -o /tmp/bazel.sha256 \
        "https://github.com/bazelbuild/bazel/releases/download/${BAZEL_VERSION}/bazel-${BAZEL_VERSION}-linux-x86_64.sha256" \
    && echo "$(cut -d ' ' -f 1 /tmp/bazel.sha256)  /usr/local/bin/bazel" | sha256sum -c - \
    && chmod 0755 /usr/local/bin/bazel \
    && rm /tmp/bazel.sha256

# DeepMind Lab's python_system.bzl runs `python3` to find the CPython and NumPy
# headers (distutils.sysconfig, numpy.get_include) and the wheel tags (packaging);
# build_pip_package runs `setup.py bdist_wheel`.
RUN python3 -m pip install --no-cache-dir \
        numpy==1.26.4 \
        packaging==26.3 \
        setuptools==69.5.1 \
        wheel==0.43.0

# Bazel is meant to run as an ordinary user, and nothing below needs root.
RUN groupadd --gid 1000 builder \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash builder \
    && install -d -o builder -g builder /src /tmp/dmlab_pkg
USER 1000:1000
WORKDIR /src

RUN git init --quiet lab \
    && git -C lab remote add origin "${DMLAB_REPO}" \
    && git -C lab fetch --quiet --depth 1 origin "${DMLAB_COMMIT}" \
    && git -C lab checkout --quiet FETCH_HEAD \
    && git clone --quiet --depth 1 --branch "${ABSEIL_TAG}" "${ABSEIL_REPO}" abseil-cpp

WORKDIR /src/lab
ENV PYTHON_BIN_PATH=/usr/local/bin/python3

# One RUN: bazel-bin is a symlink into Bazel's output base, which lives in the cache
# mount and is gone once this step ends. The wheel is copied out to /tmp/dmlab_pkg.
# --spawn_strategy=local: Bazel's linux-sandbox needs namespaces that a build
# container usually does not grant; the container is the sandbox here.
# DMLAB_BAZEL_EXTRA_FLAGS is deliberately unquoted: it holds zero or more flags.
RUN --mount=type=cache,target=/home/builder/.cache/bazel,uid=1000,gid=1000 \
    bazel build -c opt \
        --noenable_bzlmod --enable_workspace \
        --spawn_strategy=local \
        --python_version=PY3 \
        --override_repository=com_google_absl=/src/abseil-cpp \
        --cxxopt=-std=c++17 \
        --action_env=PYTHON_BIN_PATH \
        ${DMLAB_BAZEL_EXTRA_FLAGS} \
        //python/pip_package:build_pip_package \
    && ./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg \
    && bazel shutdown \
    && ls -l /tmp/dmlab_pkg

# Smoke test: install the wheel in a throwaway venv and step a level with the
# software (OSMesa) renderer, as the headless actors will.
COPY --chown=builder:builder docker/dmlab_smoke.py /src/dmlab_smoke.py
RUN python3 -m venv /tmp/smoke \
    && /tmp/smoke/bin/pip install --no-cache-dir numpy==1.26.4 /tmp/dmlab_pkg/*.whl \
    && /tmp/smoke/bin/python /src/dmlab_smoke.py \
    && rm -rf /tmp/smoke

# ---------------------------------------------------------------------------------
# Only the wheel, under /dmlab/.
FROM scratch AS wheel
COPY --from=build /tmp/dmlab_pkg/ /dmlab/
