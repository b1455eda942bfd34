#!/usr/bin/env bash
# Make the Python base image locally when no container registry is reachable (python:3.11-slim-bookworm
# cannot be pulled): a minimal Debian bookworm with python3, venv and pip, made with debootstrap from the
# host's Debian mirror, imported into podman.
#
#   docker/podman/base-image.sh [TAG]        # default TAG: localhost/bookworm-python:3.11
#
# Then build with --build-arg PYTHON_IMAGE=TAG. The host's apt sources (bookworm-updates and -security
# included) and its extra CA certificates (/usr/local/share/ca-certificates: a TLS-intercepting proxy's CA,
# without which pip and apt fail with CERTIFICATE_VERIFY_FAILED) are copied in. Needs root, debootstrap
# and podman. Does nothing if TAG exists already (R2AC_REBUILD_BASE=1 to make it again).
set -euo pipefail
TAG=${1:-localhost/bookworm-python:3.11}
say() { printf '[base-image] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "debootstrap needs root: run as root (or pull a python:3.11-slim-bookworm image instead)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"
command -v podman >/dev/null || die "podman is missing: apt-get install -y podman"
if [[ -z "${R2AC_REBUILD_BASE:-}" ]] && podman image exists "$TAG"; then
  say "$TAG exists; R2AC_REBUILD_BASE=1 makes it again"
  exit 0
fi

# The host's mirror (first deb.debian.org-style URI in its apt sources), else Debian's default.
MIRROR=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
         | awk '{print $2}' | grep -v -- '-security' | head -n 1 || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
ROOT=$(mktemp -d /var/tmp/r2ac-base.XXXXXX)
cleanup() {  # debootstrap may leave proc/sys mounted inside ROOT after a failure: never delete through them
  for m in proc sys dev/pts dev; do umount -l "$ROOT/$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$ROOT" "$ROOT.log"
}
trap cleanup EXIT

say "debootstrap bookworm from $MIRROR into $ROOT"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
  bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || { tail -n 20 "$ROOT.log" >&2; die "debootstrap failed (log above)"; }
rm -f "$ROOT.log"

# apt sources: the host's, so bookworm-updates and -security come with it.
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
  rm -f "$ROOT/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$ROOT/etc/apt/sources.list.d/"
elif [[ -f /etc/apt/sources.list ]]; then
  cp /etc/apt/sources.list "$ROOT/etc/apt/sources.list"
fi
# Extra CA certificates of the host (e.g. a TLS-intercepting proxy's) and a pip.conf that uses the bundle.
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  cp -r /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/"
fi
chroot "$ROOT" update-ca-certificates >/dev/null
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$ROOT/etc/pip.conf"
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*

say "importing as $TAG"
tar -C "$ROOT" -c . | podman import --change 'CMD ["/bin/bash"]' - "$TAG" >/dev/null
say "done: $(podman image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
