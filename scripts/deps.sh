#!/usr/bin/env bash
# Installs what rix needs from Debian's packages, only if something is missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libsodium-dev libzstd-dev libxxhash-dev libcmocka-dev
      libssl-dev libjansson-dev libcurl4-openssl-dev restic rclone python3)
if [ "${RIX_WITH_CLANG:-0}" = 1 ]; then
	pkgs+=(clang libclang-rt-14-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
fi
