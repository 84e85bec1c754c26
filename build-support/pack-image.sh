#!/usr/bin/env bash
# Packs a root filesystem into an image archive (docker-archive, what `docker save` writes),
# without a registry or a Docker Engine: one reproducible layer (fixed times, owners, order).
# The images' own scripts (jobs/trainer/image.sh, cli/image.sh) fill the root and call this.
#
#   build-support/pack-image.sh ROOTFS OUT.tar TAG ENTRYPOINT_JSON [CMD_JSON] [ENV_JSON]
#
# ENTRYPOINT_JSON and CMD_JSON are JSON arrays (["/wasmsched"]), ENV_JSON an array of
# "KEY=VALUE" strings (default ["PATH=/"]).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 ROOTFS OUT.tar TAG ENTRYPOINT_JSON [CMD_JSON] [ENV_JSON]" >&2; exit 2; }
rootfs=$1 out=$2 tag=$3 entrypoint=$4 cmd=${5:-[]} env=${6:-'["PATH=/"]'}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/image"
tar -C "$rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir -p "$work/image/$layer"
mv "$work/layer.tar" "$work/image/$layer/layer.tar"
arch=$(case "$(uname -m)" in aarch64) echo arm64 ;; *) echo amd64 ;; esac)
printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":%s,"Cmd":%s,"Env":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"build-support/pack-image.sh"}],"created":"1970-01-01T00:00:00Z"}' \
  "$arch" "$entrypoint" "$cmd" "$env" "$layer" >"$work/config.json"
config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
mv "$work/config.json" "$work/image/$config.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$tag" "$layer" >"$work/image/manifest.json"
tar -C "$work/image" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out" .
echo "$out: $tag (layer ${layer:0:12}, $(du -h "$out" | cut -f1))"
