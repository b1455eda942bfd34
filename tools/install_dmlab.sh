#!/usr/bin/env bash
# Install DeepMind Lab into the project's venv: `make dmlab` runs this.
#
#   DMLAB_WHEEL=path/to/deepmind_lab-1.0-py3-none-any.whl tools/install_dmlab.sh   # a wheel built before
#   tools/install_dmlab.sh                                      # no wheel given: build one (build_dmlab.sh)
#
# Installs the Debian runtime libraries the engine loads (OSMesa, SDL2, Lua 5.1, jpeg, png, glib, libxml2,
# zlib) when they are missing and apt-get is available, the wheel without its dependency resolution
# (it asks only for numpy and six; numpy stays the project's pin), six and dm-env (its __init__ imports
# its dm_env bindings), then loads a level as a check.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
say() { printf '[install_dmlab] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ -x "$PYTHON" ]] || die "no Python at $PYTHON: run \`make install\` first (or set PYTHON)"

RUNTIME_DEBS="libosmesa6 libsdl2-2.0-0 liblua5.1-0 libjpeg62-turbo libpng16-16 libglib2.0-0 libxml2 zlib1g"
if command -v dpkg-query >/dev/null; then
  missing=$(for p in $RUNTIME_DEBS; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok' || echo "$p"; done)
  if [[ -n "$missing" ]]; then
    if command -v apt-get >/dev/null && { [[ $(id -u) == 0 ]] || command -v sudo >/dev/null; }; then
      sudo_cmd=(); [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
      say "installing Debian packages: $(echo $missing)"
      "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >/dev/null \
        || die "apt-get could not install $(echo $missing); install them and run again"
    else
      say "warning: missing Debian packages $(echo $missing) and no apt-get/root here; DeepMind Lab needs them"
    fi
  fi
else
  say "not a Debian system: make sure OSMesa, SDL2, Lua 5.1, libjpeg, libpng, glib, libxml2 and zlib are installed"
fi

WHEEL=${DMLAB_WHEEL:-}
if [[ -z "$WHEEL" ]]; then
  say "DMLAB_WHEEL not set: building DeepMind Lab from source (tools/build_dmlab.sh)"
  PYTHON="$PYTHON" "$ROOT/tools/build_dmlab.sh"
  WHEEL=$(ls "${DMLAB_BUILD_DIR:-$ROOT/build/dmlab}"/dist/deepmind_lab-*.whl | head -n 1)
fi
[[ -f "$WHEEL" ]] || die "DMLAB_WHEEL=$WHEEL is not a file"
case "$WHEEL" in *.whl) ;; *) die "DMLAB_WHEEL=$WHEEL is not a .whl file" ;; esac

py_tag=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
ext=$(unzip -Z1 "$WHEEL" 2>/dev/null | grep -c '^deepmind_lab/deepmind_lab.so$' || true)
[[ "$ext" == 1 ]] || die "$WHEEL holds no deepmind_lab/deepmind_lab.so: not a DeepMind Lab wheel"

say "installing $WHEEL into $("$PYTHON" -c 'import sys; print(sys.prefix)') (Python $py_tag)"
"$PYTHON" -m pip install -q --no-deps --force-reinstall "$WHEEL"
"$PYTHON" -m pip install -q six dm-env

say "check: load rooms_watermaze and take a step"
cd "$ROOT"
"$PYTHON" - <<'PY' || die "the wheel is installed but DeepMind Lab does not run (a wheel built for another Python? \
it must match this venv's Python $py_tag)"
from r2ac.envs import make_vec_env
venv = make_vec_env("dmlab:rooms_watermaze", 1, 0)
obs = venv.reset()
venv.step([0])
venv.close()
print(f"DeepMind Lab OK: dmlab:rooms_watermaze observation {obs.shape[1:]} {obs.dtype}")
PY
