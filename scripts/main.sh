#!/usr/bin/env bash
# The main job: install what is missing, build (Release), then rix on a fresh local repository:
# back up /usr/share/doc, back it up again (nothing new is stored), list the snapshots, print
# the stats (dedup ratio, index memory), restore the latest into a fresh directory and compare
# it with the source, back up 32 MiB of other data and forget that snapshot with --prune (its
# packs deleted, the index rewritten), read and verify every byte, let the real restic check
# the same repository, and back up the same files with restic on top (it stores nothing new).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DRIX_BUILD_TESTS=OFF >/dev/null
cmake --build build-rel -j"$(nproc)" --target rix-cli >/dev/null
repo=${RIX_MAIN_REPO:-/var/tmp/rix-main-repo}
src=${RIX_MAIN_SOURCE:-/usr/share/doc}
export RIX_PASSWORD=${RIX_PASSWORD:-rix-main-job} RESTIC_PASSWORD=${RIX_PASSWORD:-rix-main-job}
rix=./build-rel/rix
rm -rf "$repo"
echo "== rix init $repo"
$rix -r "$repo" init
echo "== rix backup $src"
$rix -r "$repo" backup "$src"
echo "== rix backup $src (again: the first snapshot is the parent, no file is read, nothing new stored)"
$rix -r "$repo" backup "$src"
echo "== rix snapshots"
$rix -r "$repo" snapshots
echo "== rix restore latest:$src into a fresh directory (--verify), compared with the source"
out=$(mktemp -d /var/tmp/rix-main-restore.XXXXXX)
$rix -r "$repo" restore "latest:$src" --target "$out" --verify
diff -r --no-dereference "$src" "$out" # set -e: a difference fails the job (and leaves $out)
echo "restored: equal to $src"
rm -rf "$out"
echo "== rix stats"
$rix -r "$repo" stats "$@"
extra=$(mktemp -d /var/tmp/rix-main-extra.XXXXXX)
head -c 33554432 /dev/urandom >"$extra/random.bin"
echo "== rix backup --tag extra (32 MiB of other data), then rix forget --tag extra latest --prune"
$rix -r "$repo" backup --tag extra "$extra" | tail -3
$rix -r "$repo" forget --tag extra latest --prune
rm -rf "$extra"
echo "== rix check --read-data"
$rix -r "$repo" check --read-data
echo "== restic check --read-data (the real restic reads what rix wrote)"
restic --no-cache -q -r "$repo" check --read-data && echo "restic: no errors were found"
echo "== restic backup $src (restic takes rix's snapshot as its parent: nothing new)"
restic --no-cache -r "$repo" backup "$src" | tail -5
