# syntax=docker/dockerfile:1.7
#
# DeepMind Lab as a Python wheel for the r2ac images (CPython 3.11, NumPy 1.26 ABI).
#
# DeepMind Lab publishes no wheel. This file makes one in either of two ways and
# smoke-tests it; the final stage holds only the wheel, under /dmlab/, for the actor
# and learner images to install (`FROM <this image> AS dmlab` and a bind mount).
#
# 1. From source (default), with the project's build script tools/build_dmlab.sh:
#    Debian's bazel-bootstrap (Bazel 4.2.3) and Debian's system libraries, the
#    sources cloned from GitHub at pinned commits (Lab b1db91a, abseil 20230802.1,
#    rules_cc b1c40e1). About 5 minutes of Bazel on 2 cores, ~3 GB of caches.
#      docker build -f docker/dmlab.Dockerfile -t r2ac/dmlab-wheel:lab-b1db91a .
# 2. From a wheel built before (e.g. by `make dmlab` or on another machine): pass
#    the folder that holds it as the build context named "prebuilt"; the Bazel
#    stage is then skipped.
#      docker build -f docker/dmlab.Dockerfile --build-arg DMLAB_FROM=prebuilt \
#        --build-context prebuilt=/path/to/wheels \
#        --build-arg DMLAB_WHEEL_SHA256=<sha256 of the .whl> \
#        -t r2ac/dmlab-wheel:lab-b1db91a .
#
# What has been run on the machines r2ac is developed on: tools/build_dmlab.sh's
# recipe (the same Bazel, libraries, pins and patch) built the wheel in
# ../shared/wheels outside any container, and route 2 is the one exercised with
# podman (docs/environments.md, section DeepMind Lab, says which builds ran).

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# source | prebuilt
ARG DMLAB_FROM=source

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The libraries the engine loads at run time (OSMesa: headless software rendering).
# Not version-pinned: Debian's archive replaces superseded point releases, which
# would break pinned installs; the Debian release is fixed by PYTHON_IMAGE.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libosmesa6 libsdl2-2.0-0 liblua5.1-0 libjpeg62-turbo libpng16-16 \
        libglib2.0-0 libxml2 zlib1g unzip \
    && rm -rf /var/lib/apt/lists/*

# ---------------------------------------------------------------------------------
FROM base AS source-build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Lab's commit, also pinned in tools/build_dmlab.sh (the script checks it out).
ARG DMLAB_COMMIT=b1db91af5b4d2f3a24466f4632a3e5e1b0829cca
# Debian's bazel-bootstrap; build_dmlab.sh installs it with the other build packages.
ARG BAZEL_VERSION=4.2.3
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git g++ \
    && rm -rf /var/lib/apt/lists/*
# python_system.bzl asks this interpreter for the CPython and NumPy headers (a venv:
# works on the python images and on Debian's own python3 alike).
RUN python3 -m venv /opt/buildpy \
    && /opt/buildpy/bin/pip install --no-cache-dir numpy==1.26.4 wheel==0.43.0 setuptools==69.5.1
COPY tools/build_dmlab.sh /opt/tools/build_dmlab.sh
RUN apt-get update \
    && DMLAB_BUILD_DIR=/build PYTHON=/opt/buildpy/bin/python /opt/tools/build_dmlab.sh \
    && bazel --version | grep -qx "bazel ${BAZEL_VERSION}.*" \
    && test "$(git -C /build/lab rev-parse HEAD)" = "${DMLAB_COMMIT}" \
    && mkdir -p /tmp/dmlab_pkg && cp /build/dist/*.whl /tmp/dmlab_pkg/ \
    && rm -rf /build /var/lib/apt/lists/*

# ---------------------------------------------------------------------------------
# Empty unless replaced with --build-context prebuilt=DIR.
FROM scratch AS prebuilt

FROM base AS prebuilt-build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG DMLAB_WHEEL_SHA256=""
COPY --from=prebuilt / /tmp/dmlab_pkg/
RUN n=$(find /tmp/dmlab_pkg -maxdepth 1 -name 'deepmind_lab-*.whl' | wc -l); \
    if [ "$n" -ne 1 ]; then \
      echo "DMLAB_FROM=prebuilt needs exactly one deepmind_lab-*.whl in --build-context prebuilt=DIR (found $n)" >&2; \
      exit 1; \
    fi; \
    wheel=$(find /tmp/dmlab_pkg -maxdepth 1 -name 'deepmind_lab-*.whl'); \
    if [ -n "${DMLAB_WHEEL_SHA256}" ]; then echo "${DMLAB_WHEEL_SHA256}  ${wheel}" | sha256sum -c -; fi; \
    find /tmp/dmlab_pkg -mindepth 1 ! -name 'deepmind_lab-*.whl' -delete

# ---------------------------------------------------------------------------------
FROM ${DMLAB_FROM}-build AS chosen

# Smoke test: install the wheel in a fresh venv and step rooms_watermaze at 96x72
# with the software renderer, as the headless actors do.
FROM base AS smoke
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=chosen /tmp/dmlab_pkg/ /tmp/dmlab_pkg/
COPY docker/dmlab_smoke.py /opt/dmlab_smoke.py
RUN python3 -m venv /tmp/smoke \
    && /tmp/smoke/bin/pip install --no-cache-dir numpy==1.26.4 six==1.17.0 dm-env==1.6 setuptools==69.5.1 \
    && /tmp/smoke/bin/pip install --no-cache-dir --no-deps /tmp/dmlab_pkg/*.whl \
    && /tmp/smoke/bin/python /opt/dmlab_smoke.py \
    && rm -rf /tmp/smoke

# ---------------------------------------------------------------------------------
# Only the (smoke-tested) wheel, under /dmlab/.
FROM scratch AS wheel
COPY --from=smoke /tmp/dmlab_pkg/ /dmlab/
