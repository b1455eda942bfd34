#!/usr/bin/env bash
# Make this host able to run r2ac's container tests with podman (`make test-cluster` runs it first), then
# check that it really can: a trivial container (a rootfs of /bin/true and its libraries, no image and no
# registry needed) must start and exit 0.
#
# Exit 0: podman, podman-compose, debootstrap, rsync and ssh (for `ray up`) are there (installed now if
#         they were missing and this is Debian/Ubuntu as root or with sudo) and a container runs.
# Exit 3: containers cannot run here: the tools are missing and cannot be installed, or the kernel /
#         sandbox refuses a container (no user namespaces, no cgroups, mounts not permitted, ...).
#         ONE line on stdout says why (`make test-cluster` prints it as "skipped: ...").
# Exit 1: anything else went wrong (a real failure, not a skip); one line on stdout says what and what to do.
# Progress goes to stderr.
set -uo pipefail
say() { printf '[setup-host] %s\n' "$*" >&2; }
skip() { printf '%s\n' "$*"; exit 3; }
fail() { printf '%s\n' "$*"; exit 1; }
# The last non-empty line of a tool's output, for one-line messages.
last_line() { printf '%s\n' "$1" | sed '/^[[:space:]]*$/d' | tail -n 1; }

PKGS="podman podman-compose runc buildah debootstrap rsync openssh-client"
tools_missing() {
  local t out=""
  for t in podman podman-compose debootstrap rsync ssh; do command -v "$t" >/dev/null || out="$out $t"; done
  printf '%s' "$out"
}

missing=$(tools_missing)
if [[ -n "$missing" ]]; then
  if ! command -v apt-get >/dev/null; then
    skip "missing:$missing, and no apt-get here: install podman and podman-compose with this system's package manager"
  fi
  sudo_cmd=()
  if [[ $(id -u) != 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo_cmd=(sudo -n); else
      skip "missing:$missing; installing them needs root: sudo apt-get install -y $PKGS"
    fi
  fi
  say "installing $PKGS (Debian packages)"
  log=/tmp/r2ac-setup-host.log
  if ! { "${sudo_cmd[@]}" nice -n 19 apt-get update -qq \
         && "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive nice -n 19 apt-get install -y -qq $PKGS; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    skip "apt-get could not install$missing ($(last_line "$(tail -n 5 "$log")")); log: $log"
  fi
  missing=$(tools_missing)
  [[ -z "$missing" ]] || skip "still missing after apt-get install:$missing"
  say "installed $PKGS"
fi
version=$(podman --version 2>&1) || fail "podman is installed but \`podman --version\` fails: $(last_line "$version")"
say "$version, podman-compose $(podman-compose --version 2>/dev/null | awk '/podman-compose/ {print $NF; exit}')"

# A trivial container. The limits are the ones tests/test_cluster.py gives its containers: where the engine
# lacks CAP_SYS_RESOURCE, podman's defaults (nofile 1048576) fail with "error setting rlimit type 7" although
# containers run fine with limits this host allows.
hard() { local v; v=$(ulimit -H "$1"); [[ $v == unlimited ]] && v=$2; (( v > $2 )) && v=$2; printf '%s' "$v"; }
nofile=$(hard -n 65536)
nproc=$(hard -u 32768)
runtime=()
command -v runc >/dev/null && runtime=(--runtime runc)
true_bin=/bin/true
[[ -x $true_bin ]] || true_bin=/usr/bin/true
[[ -x $true_bin ]] || fail "no /bin/true to put into the probe container"
probe_root=$(mktemp -d /var/tmp/r2ac-probe.XXXXXX) || fail "mktemp failed in /var/tmp: make it writable"
trap 'rm -rf --one-file-system "$probe_root"' EXIT
for f in "$true_bin" $(ldd "$true_bin" 2>/dev/null | grep -oE '/[^ ]+'); do
  cp -L --parents "$f" "$probe_root" || fail "could not copy $f into the probe container's root"
done
say "probe: a container of /bin/true (nofile $nofile, nproc $nproc${runtime:+, ${runtime[1]}})"
if out=$(timeout 300 podman run --rm --network none --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
           "${runtime[@]}" --rootfs "$probe_root" "$true_bin" 2>&1); then
  say "probe: a container ran"
  exit 0
else
  rc=$?
fi
why=$(last_line "$out")
printf '%s\n' "$out" | tail -n 5 >&2
if (( rc == 124 )); then
  fail "podman did not start a trivial container within 300 s: look at \`podman info\` and the engine's logs"
fi
# What the kernel or a sandbox refuses (user namespaces, cgroups, mounts, seccomp) cannot be fixed from here.
if grep -qiE 'namespace|cgroup|operation not permitted|permission denied|read-only file system|not supported|seccomp|pivot_root|unshare|newuidmap|newgidmap|clone' <<<"$why"; then
  skip "podman cannot start a container on this host: $why"
fi
fail "podman failed to start a trivial container (exit $rc): $why; check \`podman info\` and /etc/containers/containers.conf"
