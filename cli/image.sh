#!/usr/bin/env bash
# Packs the host into an image archive without a registry or a Docker Engine
# (build-support/pack-image.sh); import it into a cluster's nodes with
# `../shared/k8s/cluster import OUT.tar` (or `ctr -n k8s.io images import OUT.tar`), or load it
# with `docker load -i OUT.tar`. The image holds:
#   /wasmsched          the host (entrypoint; `run --config /etc/wasmsched/host.toml` by default)
#   /bin/busybox        a static busybox: a shell, and `tar` (what `kubectl cp` runs, for a host that
#                       serves a policies folder rather than SchedulingPolicy resources)
#   /etc/ssl/certs/ca-certificates.crt  this machine's CA bundle: TLS to registries (OCI policies)
#   /etc/wasmsched, /var/lib/wasmsched/{policies,cache}, /run/wasmsched, /tmp
# and, for a binary that is not static, the shared libraries `ldd` names, at their paths.
#
#   cli/image.sh OUT.tar [--binary PATH] [--tag REPO:TAG] [--busybox PATH]
#
# Without --binary it builds `wasmsched` statically, in release (cargo, this workspace; a few
# minutes). The tag is local/wasmsched:1 unless given; pods name it with imagePullPolicy: Never
# (or IfNotPresent). Without a static busybox (Debian's busybox-static) the image has no tar,
# and says so.
set -euo pipefail
usage() { echo "usage: $0 OUT.tar [--binary PATH] [--tag REPO:TAG] [--busybox PATH]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1; shift
binary="" tag="local/wasmsched:1" busybox=$(command -v busybox || true)
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?}; shift 2 ;;
    --tag) tag=${2:?}; shift 2 ;;
    --busybox) busybox=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$binary" ]; then
  host=$(rustc -vV | sed -n 's/^host: //p')
  RUSTFLAGS="-Ctarget-feature=+crt-static" CARGO_PROFILE_RELEASE_STRIP=symbols \
    cargo build --release -q -p wasmsched --target "$host" \
    --manifest-path "$root/Cargo.toml" --target-dir "$root/target/image"
  binary="$root/target/image/$host/release/wasmsched"
fi
[ -x "$binary" ] || { echo "no host binary at $binary" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$rootfs/tmp" "$rootfs/bin" "$rootfs/etc/wasmsched" "$rootfs/run/wasmsched" \
  "$rootfs/var/lib/wasmsched/policies" "$rootfs/var/lib/wasmsched/cache"
chmod 1777 "$rootfs/tmp"
cp "$binary" "$rootfs/wasmsched"
chmod 755 "$rootfs/wasmsched"
# A dynamic binary brings its libraries and loader (ldd prints "name => /path (addr)" and the
# loader as "/path (addr)").
if ldd "$binary" >/dev/null 2>&1; then
  for lib in $(ldd "$binary" | grep -o '/[^ ]*'); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
fi
# The roots TLS trusts: a pull from any registry over TLS needs them (the HTTP client refuses
# to start without one). Another bundle can be mounted over it (a private CA).
bundle=/etc/ssl/certs/ca-certificates.crt
if [ -f "$bundle" ]; then
  mkdir -p "$rootfs/etc/ssl/certs"
  cp -L "$bundle" "$rootfs$bundle"
else
  echo "no CA bundle at $bundle (Debian's ca-certificates): the image cannot pull policies over TLS" >&2
fi
if [ -n "$busybox" ] && [ -x "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1; then
  cp "$busybox" "$rootfs/bin/busybox"
  for tool in sh tar ls cat mkdir rm cp mv ps kill; do ln -s busybox "$rootfs/bin/$tool"; done
else
  echo "no static busybox (--busybox PATH, or Debian's busybox-static): the image has no tar, so kubectl cp cannot copy into it" >&2
fi
"$root/build-support/pack-image.sh" "$rootfs" "$out" "$tag" '["/wasmsched"]' \
  '["run","--config","/etc/wasmsched/host.toml"]' '["PATH=/bin:/"]'
