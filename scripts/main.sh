#!/usr/bin/env bash
# The main job: install what is missing, build (Release), then rix on a real local repository.
# The repository is made once by the real restic (a backup of /usr/share/doc, cached in
# $RIX_MAIN_REPO, default /var/tmp/rix-main-repo); rix opens it with the password, loads its
# index, prints its stats, and reads and verifies every byte (`check --read-data`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DRIX_BUILD_TESTS=OFF >/dev/null
cmake --build build-rel -j"$(nproc)" --target rix-cli >/dev/null
repo=${RIX_MAIN_REPO:-/var/tmp/rix-main-repo}
export RESTIC_PASSWORD=${RESTIC_PASSWORD:-rix-main-job}
if [ ! -f "$repo/config" ]; then
	echo "== restic makes $repo: a backup of /usr/share/doc (once)"
	restic --no-cache -q -r "$repo" init
	restic --no-cache -q -r "$repo" backup /usr/share/doc
fi
echo "== rix -r $repo stats"
./build-rel/rix -r "$repo" stats "$@"
echo "== rix -r $repo check --read-data"
./build-rel/rix -r "$repo" check --read-data
