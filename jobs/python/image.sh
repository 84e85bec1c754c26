#!/usr/bin/env bash
# Packs a PyTorch training job into an image archive (docker-archive) without a registry or a
# Docker Engine (build-support/pack-image.sh): this machine's Python, torch from PyPI with the
# CUDA libraries its wheel links (it loads them even to train on CPU; no driver is needed), the
# wasmsched_job package, and examples/torch_loop.py at /job/torch_loop.py. The shared libraries they link are copied from this machine at their
# paths. Import it with `docker load -i OUT.tar` or into a cluster's nodes
# (`../shared/k8s/cluster import OUT.tar`).
#
#   jobs/python/image.sh OUT.tar [--tag REPO:TAG] [--python PATH]
#
# pip downloads about 3.5 GB the first time (its cache keeps them). The image is about 4 GB: too
# heavy for every CI run, it backs a longer check (docs/jobs.md).
set -euo pipefail
usage() { echo "usage: $0 OUT.tar [--tag REPO:TAG] [--python PATH]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1; shift
tag="local/wasmsched-torch:1" python=$(command -v python3 || true)
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=${2:?}; shift 2 ;;
    --python) python=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done
[ -x "$python" ] || { echo "no python3: give one with --python PATH" >&2; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$("$python" -c 'import sys; print(sys.base_prefix)')
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
site="$rootfs/job/site"
mkdir -p "$rootfs$prefix" "$site" "$rootfs/tmp" "$rootfs/ckpt"
chmod 1777 "$rootfs/tmp" "$rootfs/ckpt"
# The interpreter at its own prefix (it finds its standard library there), without its tests
# or its own site-packages.
tar -C "$prefix" --exclude="lib/python$version/test" --exclude="lib/python$version/site-packages" \
  --exclude="lib/python$version/idlelib" --exclude="lib/python$version/tkinter" --exclude='__pycache__' \
  -cf - bin lib include 2>/dev/null | tar -C "$rootfs$prefix" -xf -
# torch as PyPI has it, with the CUDA libraries it links (it loads them even to run on CPU),
# less triton (the compiler; plain training never imports it). pip's cache keeps the wheels.
"$python" -m pip install -q --no-compile --target "$site" torch
rm -rf "$site/triton" "$site"/triton-*.dist-info "$site/bin"
# From a copy: pip builds a local project in its folder, and leaves build/ there.
cp -r "$root/jobs/python" "$work/package"
"$python" -m pip install -q --no-deps --no-compile --target "$site" "$work/package"
cp "$root/jobs/python/examples/torch_loop.py" "$rootfs/job/torch_loop.py"
# Every shared library the tree links that is not in it, from this machine, at its path.
libs=$(find "$rootfs" -type f \( -name '*.so*' -o -perm -u+x \) -print0 | { xargs -0 ldd 2>/dev/null || true; } |
  awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | grep -v "^$rootfs" | sort -u)
for lib in $libs; do
  [ -e "$rootfs$lib" ] && continue
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
mkdir -p "$rootfs/lib64"
cp -L /lib64/ld-linux-x86-64.so.2 "$rootfs/lib64/" 2>/dev/null || true
"$root/build-support/pack-image.sh" "$rootfs" "$out" "$tag" "[\"$prefix/bin/python3\", \"-u\", \"/job/torch_loop.py\"]" '[]' \
  "[\"PATH=$prefix/bin:/\", \"PYTHONPATH=/job/site\", \"PYTHONDONTWRITEBYTECODE=1\"]"
