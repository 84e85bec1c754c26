#!/usr/bin/env bash
# Packs the training job into an image archive (docker-archive, what `docker save` writes)
# without a registry or a Docker Engine (build-support/pack-image.sh): one layer holding the
# static trainer at /wasmsched-trainer and empty /tmp and /ckpt. Import it with `docker load -i OUT.tar` or into
# a cluster's nodes (`ctr -n k8s.io images import OUT.tar`; `../shared/k8s/cluster import OUT.tar`).
#
#   jobs/trainer/image.sh OUT.tar [--binary PATH] [--tag REPO:TAG]
#
# Without --binary it builds the trainer statically first (cargo, this workspace). The tag is
# local/wasmsched-trainer:1 unless given; pods name it with imagePullPolicy: Never.
set -euo pipefail
usage() { echo "usage: $0 OUT.tar [--binary PATH] [--tag REPO:TAG]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1; shift
binary="" tag="local/wasmsched-trainer:1"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?}; shift 2 ;;
    --tag) tag=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "$binary" ]; then
  host=$(rustc -vV | sed -n 's/^host: //p')
  RUSTFLAGS="-Ctarget-feature=+crt-static" cargo build --release -q -p wasmsched-trainer --target "$host" \
    --manifest-path "$root/Cargo.toml" --target-dir "$root/target/jobs"
  binary="$root/target/jobs/$host/release/wasmsched-trainer"
fi
[ -x "$binary" ] || { echo "no trainer binary at $binary" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/tmp" "$work/rootfs/ckpt"
chmod 1777 "$work/rootfs/tmp" "$work/rootfs/ckpt"
cp "$binary" "$work/rootfs/wasmsched-trainer"
chmod 755 "$work/rootfs/wasmsched-trainer"
"$root/build-support/pack-image.sh" "$work/rootfs" "$out" "$tag" '["/wasmsched-trainer"]'
