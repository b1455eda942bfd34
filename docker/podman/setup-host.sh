#!/usr/bin/env bash
# Make this host able to run r2ac's container tests with podman (`make test-cluster` runs it first).
#
# Exit 0: podman, podman-compose, debootstrap, rsync and ssh (for `ray up`) are there, installed now if they were missing
#         and this is Debian/Ubuntu as root (or with sudo).
# Exit 3: they cannot be had here; one line says why and what to do (make test-cluster then skips).
set -uo pipefail
say() { printf '[setup-host] %s\n' "$*" >&2; }
PKGS="podman podman-compose runc buildah debootstrap rsync openssh-client"
missing=""
for tool in podman podman-compose debootstrap rsync ssh; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
if [[ -z "$missing" ]]; then
  say "podman $(podman --version | awk '{print $3}'), podman-compose $(podman-compose --version 2>/dev/null | awk '/podman-compose/ {print $NF; exit}')"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  say "missing:$missing and no apt-get here: install podman and podman-compose with your package manager"
  exit 3
fi
sudo_cmd=()
if [[ $(id -u) != 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo_cmd=(sudo -n); else
    say "missing:$missing; installing needs root: sudo apt-get install -y $PKGS"
    exit 3
  fi
fi
say "installing $PKGS (Debian packages)"
if ! { "${sudo_cmd[@]}" nice -n 19 apt-get update -qq \
       && "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive nice -n 19 apt-get install -y -qq $PKGS; } >/tmp/r2ac-setup-host.log 2>&1; then
  tail -n 5 /tmp/r2ac-setup-host.log >&2
  say "apt-get could not install $PKGS (log: /tmp/r2ac-setup-host.log): install them by hand and run again"
  exit 3
fi
command -v podman >/dev/null || { say "podman still missing after apt-get install"; exit 3; }
say "installed: podman $(podman --version | awk '{print $3}')"
