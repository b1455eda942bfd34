#!/usr/bin/env bash
# Build a DeepMind Lab wheel for this project's Python (3.11) from source, with the Bazel that Debian
# packages (bazel-bootstrap 4.2.3) and Debian's system libraries instead of downloaded archives.
#
#   tools/build_dmlab.sh                      # sources cloned from GitHub at the pinned commits
#   tools/build_dmlab.sh --prepare-only       # stop before Bazel: sources, patch, WORKSPACE only
#   LAB_SRC=/path/lab.git ABSL_SRC=... RULES_CC_SRC=... tools/build_dmlab.sh   # from local git dirs
#
# Environment (all optional):
#   DMLAB_BUILD_DIR  work folder (default build/dmlab; Bazel's caches there need ~3 GB)
#   PYTHON           the interpreter the wheel is for; must import numpy (default .venv/bin/python)
#   LAB_SRC, ABSL_SRC, RULES_CC_SRC   git URL or local git directory of each source
#   JOBS             Bazel jobs (default: number of CPUs)
# Output: $DMLAB_BUILD_DIR/dist/deepmind_lab-1.0-py3-none-any.whl (the "any" tag is DeepMind Lab's; the
# wheel holds a CPython extension for $PYTHON's version and machine). Install it with
# `make dmlab DMLAB_WHEEL=<that file>`.
#
# What is pinned, and why:
#   google-deepmind/lab   b1db91af5b4d2f3a24466f4632a3e5e1b0829cca (2023-01-04, the last commit)
#   abseil-cpp            tag 20230802.1 (has absl/log, which Lab uses; still builds with Bazel 4)
#   bazelbuild/rules_cc   b1c40e1de81913a3c40e5948f78719c28152486d (the rules_cc Bazel 4.2.3 names)
# Lab's own WORKSPACE downloads moving archives (abseil master, ...); it is replaced by one that points
# at the pinned snapshots and at Debian's headers and libraries (eigen, glib, libxml2, lua5.1, jpeg, png,
# zlib, SDL2). One source change: q3map2's `typedef qboolean bool` clashes with <stdbool.h>, which
# Debian's libxml2 headers pull in through ICU; it is guarded.
# Sources whose git objects are incomplete (a partial mirror) are checked out without the missing
# files; those are game assets (the natlab_* maps, some textures), listed in $DMLAB_BUILD_DIR/missing.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mkdir -p "${DMLAB_BUILD_DIR:-$ROOT/build/dmlab}" && cd "${DMLAB_BUILD_DIR:-$ROOT/build/dmlab}" && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
LAB_SRC=${LAB_SRC:-https://github.com/google-deepmind/lab.git}
ABSL_SRC=${ABSL_SRC:-https://github.com/abseil/abseil-cpp.git}
RULES_CC_SRC=${RULES_CC_SRC:-https://github.com/bazelbuild/rules_cc.git}
LAB_COMMIT=b1db91af5b4d2f3a24466f4632a3e5e1b0829cca
ABSL_REF=20230802.1
RULES_CC_COMMIT=b1c40e1de81913a3c40e5948f78719c28152486d
JOBS=${JOBS:-$(nproc)}
MULTIARCH=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)

say() { printf '[build_dmlab] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

"$PYTHON" -c 'import numpy' 2>/dev/null || die "PYTHON=$PYTHON cannot import numpy (run make install first)"

# ---------------------------------------------------------------------------- 1. Debian packages
BUILD_DEBS="bazel-bootstrap bazel-skylib bazel-platforms bazel-rules-java bazel-rules-proto git g++ zip unzip
  gettext libosmesa6-dev libsdl2-dev liblua5.1-0-dev libjpeg-dev libpng-dev zlib1g-dev libglib2.0-dev
  libxml2-dev libeigen3-dev"
missing_debs=$(for p in $BUILD_DEBS; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok' || echo "$p"; done)
if [[ -n "$missing_debs" ]]; then
  command -v apt-get >/dev/null || die "missing Debian packages: $(echo $missing_debs) (no apt-get here)"
  sudo_cmd=(); [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
  say "installing $(echo $missing_debs)"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing_debs >/dev/null
fi
command -v bazel >/dev/null || die "no bazel on PATH after installing bazel-bootstrap"

# ---------------------------------------------------------------------------- 2. Sources
# A git URL is cloned (bare) once into $WORK/git/; a local directory is used as it is.
git_dir_of() {  # name src -> prints a git directory
  local name=$1 src=$2
  if [[ -d "$src" ]]; then
    git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || die "$src is not a git directory"
    (cd "$src" && cd "$(git rev-parse --git-dir)" && pwd)
  else
    if [[ ! -d "$WORK/git/$name.git" ]]; then
      say "cloning $src"
      git clone -q --bare "$src" "$WORK/git/$name.git"
    fi
    echo "$WORK/git/$name.git"
  fi
}
LAB_GIT=$(git_dir_of lab "$LAB_SRC")
ABSL_GIT=$(git_dir_of abseil-cpp "$ABSL_SRC")
RULES_CC_GIT=$(git_dir_of rules_cc "$RULES_CC_SRC")

export_tree() {  # git_dir ref dest: the tree of ref as plain files
  local git_dir=$1 ref=$2 dest=$3
  [[ -d "$dest" ]] && return 0
  mkdir -p "$dest.tmp"
  git --git-dir="$git_dir" archive "$ref" | tar -x -C "$dest.tmp"
  mv "$dest.tmp" "$dest"
}
export_tree "$ABSL_GIT" "$ABSL_REF" "$WORK/deps/abseil-cpp"
export_tree "$RULES_CC_GIT" "$RULES_CC_COMMIT" "$WORK/deps/rules_cc"

if [[ ! -d "$WORK/lab/.git" ]]; then
  # Files whose blobs the source lacks (a partial mirror) are left out of the checkout.
  git --git-dir="$LAB_GIT" ls-tree -r "$LAB_COMMIT" \
    | awk '$2 == "blob" {print $3}' \
    | git --git-dir="$LAB_GIT" cat-file --batch-check='%(objectname)' 2>/dev/null \
    | awk '/ missing$/ {print $1}' > "$WORK/missing_ids.txt" || true
  git --git-dir="$LAB_GIT" ls-tree -r "$LAB_COMMIT" \
    | awk 'NR == FNR {gone[$1] = 1; next} ($3 in gone) {sub(/^[^\t]*\t/, ""); print}' "$WORK/missing_ids.txt" - \
    > "$WORK/missing.txt"
  git clone -q --no-checkout "$LAB_GIT" "$WORK/lab"
  if [[ -s "$WORK/missing.txt" ]]; then
    say "$(wc -l < "$WORK/missing.txt") files are absent from $LAB_SRC; building without them (missing.txt)"
    git -C "$WORK/lab" sparse-checkout init --no-cone
    { echo '/*'; sed 's|^|!/|' "$WORK/missing.txt"; } > "$WORK/lab/.git/info/sparse-checkout"
  fi
  git -C "$WORK/lab" -c advice.detachedHead=false checkout -q "$LAB_COMMIT"
fi
[[ $(git -C "$WORK/lab" rev-parse HEAD) == "$LAB_COMMIT" ]] || die "$WORK/lab is not at $LAB_COMMIT"

# Debian's platforms package predates cpu:wasm32/wasm64, which this abseil refers to.
if [[ ! -d "$WORK/deps/platforms" ]]; then
  cp -rL /usr/share/bazel/platforms "$WORK/deps/platforms.tmp"
  for cpu in wasm32 wasm64; do
    printf '\nconstraint_value(\n    name = "%s",\n    constraint_setting = ":cpu",\n)\n' "$cpu" \
      >> "$WORK/deps/platforms.tmp/cpu/BUILD"
  done
  mv "$WORK/deps/platforms.tmp" "$WORK/deps/platforms"
fi

# ---------------------------------------------------------------------------- 3. Patch + WORKSPACE
cd "$WORK/lab"
BYTEBOOL=q3map2/libs/bytebool.h
if ! grep -q 'r2ac: stdbool guard' "$BYTEBOOL"; then
  "$PYTHON" - "$BYTEBOOL" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
line = next(l for l in text.splitlines() if l.startswith("typedef qboolean bool;"))
guarded = "#ifndef __bool_true_false_are_defined  /* r2ac: stdbool guard */\n" + line + "\n#endif"
open(path, "w").write(text.replace(line, guarded, 1))
PY
fi

system_lib() {  # name path target build-content
  printf 'new_local_repository(\n    name = "%s",\n    path = "%s",\n    build_file_content = """\n%s\n""",\n)\n\n' "$1" "$2" "$3"
}
{
  echo 'workspace(name = "org_deepmind_lab")'
  echo
  echo 'load("@//:python_system.bzl", "python_repo")'
  echo
  for repo in "bazel_skylib /usr/share/bazel/tools/skylib" "rules_cc $WORK/deps/rules_cc" \
              "rules_java /usr/share/bazel/rules/java" "rules_proto /usr/share/bazel/rules/proto" \
              "platforms $WORK/deps/platforms" "com_google_absl $WORK/deps/abseil-cpp"; do
    set -- $repo
    printf 'local_repository(name = "%s", path = "%s")\n' "$1" "$2"
  done
  echo
  system_lib eigen_archive /usr/include/eigen3 'cc_library(
    name = "eigen",
    hdrs = glob(["Eigen/**", "unsupported/Eigen/**"], exclude = ["**/*.txt", "**/*.cmake"]),
    includes = ["."],
    defines = ["EIGEN_MPL2_ONLY"],
    visibility = ["//visibility:public"],
)'
  system_lib glib_archive /usr "cc_library(
    name = \"glib\",
    hdrs = glob([\"include/glib-2.0/**/*.h\", \"lib/$MULTIARCH/glib-2.0/include/*.h\"]),
    includes = [\"include/glib-2.0\", \"lib/$MULTIARCH/glib-2.0/include\"],
    linkopts = [\"-lglib-2.0\"],
    visibility = [\"//visibility:public\"],
)"
  system_lib libxml_archive /usr/include/libxml2 'cc_library(
    name = "libxml",
    hdrs = glob(["libxml/*.h"]),
    includes = ["."],
    linkopts = ["-lxml2"],
    visibility = ["//visibility:public"],
)'
  system_lib lua_archive /usr/include/lua5.1 'cc_library(
    name = "lua",
    hdrs = ["lauxlib.h", "lua.h", "lualib.h", "luaconf.h"],
    includes = ["."],
    linkopts = ["-llua5.1"],
    visibility = ["//visibility:public"],
)'
  system_lib jpeg_archive /usr/include \
    'cc_library(name = "jpeg", linkopts = ["-ljpeg"], visibility = ["//visibility:public"])'
  system_lib png_archive /usr/include \
    'cc_library(name = "png", linkopts = ["-lpng16"], deps = ["@zlib_archive//:zlib"], visibility = ["//visibility:public"])'
  system_lib zlib_archive /usr/include \
    'cc_library(name = "zlib", linkopts = ["-lz"], visibility = ["//visibility:public"])'
  printf 'new_local_repository(name = "sdl_system", build_file = "@//bazel:sdl.BUILD", path = "/usr")\n\n'
  printf 'python_repo(name = "python_system", py_version = "PY3")\n'
} > WORKSPACE

cat > .bazelrc <<RC
startup --output_user_root=$WORK/bazel-root
build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17
build --jobs=$JOBS --local_cpu_resources=$JOBS
build -c opt
RC

if [[ "${1:-}" == "--prepare-only" ]]; then
  say "prepared $WORK/lab (WORKSPACE, .bazelrc, patch); run without --prepare-only to build"
  exit 0
fi

# ---------------------------------------------------------------------------- 4. Build + wheel
# python_system.bzl asks `python3` on PATH for the CPython and NumPy headers: make that $PYTHON.
shim=$WORK/python-shim
mkdir -p "$shim"
ln -sf "$PYTHON" "$shim/python3"
export PATH="$shim:$PATH" PYTHON_BIN_PATH="$PYTHON"
say "bazel build (about 5 minutes on 2 cores)"
bazel build //:deepmind_lab.so //python/pip_package:build_pip_package
rm -rf "$WORK/dist"
"$PYTHON" -c 'import wheel, setuptools' 2>/dev/null || "$PYTHON" -m pip install -q wheel "setuptools<81"
./bazel-bin/python/pip_package/build_pip_package "$WORK/dist"
bazel shutdown
ls "$WORK"/dist/*.whl
