#!/usr/bin/env bash
# Index loading, rix against restic, on index-only repositories of N blobs (bench/mkrepo.c):
#   rix --no-cache stats                        (reads and decodes every index file: a first open)
#   rix stats, the cache warm                   (--cache-dir under $REPOS, written by a run before:
#                                                the merged index read back from the cache)
#   restic --no-cache stats --mode raw-data     (loads every index file; no snapshots to walk)
# Runs are interleaved (rix, rix cached, restic, ...), RUNS each; medians of wall time, CPU time
# (user + sys) and peak RSS, from /usr/bin/time. Memory per blob: peak RSS above the baseline
# (rix stats on an empty repository: the process, the libraries, the key) over N. Blob counts are
# checked once per N with `rix list blobs` and `restic list blobs`.
#
#   bash bench/vs_restic.sh [N ...]        default: 100000 1000000 3000000
#   RUNS=5 BUILD=build-rel REPOS=/var/tmp/rix-bench-repos
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
BUILD=${BUILD:-build-rel}
REPOS=${REPOS:-/var/tmp/rix-bench-repos}
export RIX_PASSWORD=bench RESTIC_PASSWORD=bench
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000 3000000)
mkdir -p "$REPOS"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
t=/tmp/vs_t.$$
# The baseline: an empty repository's stats.
if [ ! -f "$REPOS/empty/config" ]; then
	rm -rf "$REPOS/empty"
	"$BUILD/rix" -q -r "$REPOS/empty" init
fi
: >"$t.base"
for ((i = 0; i < RUNS; i++)); do
	/usr/bin/time -f '%M' -o "$t" "$BUILD/rix" --no-cache -r "$REPOS/empty" -q stats >/dev/null
	cat "$t" >>"$t.base"
done
base=$(median <"$t.base")
printf 'baseline (rix stats of an empty repository): %.1f MiB peak RSS\n\n' "$(echo "$base / 1024" | bc -l)"
printf '| blobs | index MiB | run | wall s | CPU s | peak RSS MiB | B/blob above baseline | blobs counted |\n|---|---|---|---|---|---|---|---|\n'
for n in "${sizes[@]}"; do
	repo="$REPOS/repo-$n"
	if [ ! -f "$repo/config" ]; then
		rm -rf "$repo"
		"$BUILD/bench/rix-mkrepo" "$repo" "$n" >&2
	fi
	cache="$REPOS/cache-$n"
	rm -rf "$cache"
	imib=$(du -sm "$repo/index" | cut -f1)
	rix_count=$("$BUILD/rix" --no-cache -r "$repo" -q list blobs | wc -l)
	restic_count=$(restic --no-cache -q -r "$repo" list blobs | wc -l)
	"$BUILD/rix" --cache-dir "$cache" -r "$repo" -q stats >/dev/null # writes the cache
	: >"$t.rix"; : >"$t.cached"; : >"$t.restic"
	for ((i = 0; i < RUNS; i++)); do
		/usr/bin/time -f '%e %U %S %M' -o "$t" "$BUILD/rix" --no-cache -r "$repo" -q stats >/dev/null
		cat "$t" >>"$t.rix"
		/usr/bin/time -f '%e %U %S %M' -o "$t" "$BUILD/rix" --cache-dir "$cache" -r "$repo" -q stats >/dev/null
		cat "$t" >>"$t.cached"
		/usr/bin/time -f '%e %U %S %M' -o "$t" restic --no-cache -q -r "$repo" stats --mode raw-data >/dev/null
		cat "$t" >>"$t.restic"
	done
	for run in rix cached restic; do
		f=$t.$run
		wall=$(awk '{print $1}' "$f" | median)
		cpu=$(awk '{print $2 + $3}' "$f" | median)
		rss=$(awk '{print $4}' "$f" | median)
		count=$([ $run = restic ] && echo "$restic_count" || echo "$rix_count")
		name=$(case $run in rix) echo 'rix, no cache' ;; cached) echo 'rix, cache warm' ;; *) echo 'restic' ;; esac)
		printf '| %s | %s | %s | %.2f | %.2f | %.0f | %.1f | %s |\n' "$n" "$imib" "$name" "$wall" "$cpu" \
			"$(echo "$rss / 1024" | bc -l)" "$(echo "($rss - $base) * 1024 / $n" | bc -l)" "$count"
	done
	rm -f "$t.rix" "$t.cached" "$t.restic"
done
rm -f "$t" "$t.base"
