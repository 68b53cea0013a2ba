#!/usr/bin/env bash
# Index loading, rix against restic, on index-only repositories of N blobs (bench/mkrepo.c):
#   rix stats                                   (loads every index file into the master index)
#   restic --no-cache stats --mode raw-data     (loads every index file; no snapshots to walk)
# Runs are interleaved (rix, restic, rix, ...), RUNS each; medians of wall time, CPU time
# (user + sys) and peak RSS, from /usr/bin/time. Blob counts are checked once per N with
# `rix list blobs` and `restic list blobs`.
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
printf '| blobs | index MiB | tool | wall s | CPU s | peak RSS MiB | blobs counted |\n|---|---|---|---|---|---|---|\n'
for n in "${sizes[@]}"; do
	repo="$REPOS/repo-$n"
	if [ ! -f "$repo/config" ]; then
		rm -rf "$repo"
		"$BUILD/bench/rix-mkrepo" "$repo" "$n" >&2
	fi
	imib=$(du -sm "$repo/index" | cut -f1)
	rix_count=$("$BUILD/rix" -r "$repo" -q list blobs | wc -l)
	restic_count=$(restic --no-cache -q -r "$repo" list blobs | wc -l)
	: >/tmp/vs_rix.$$ ; : >/tmp/vs_restic.$$
	for ((i = 0; i < RUNS; i++)); do
		/usr/bin/time -f '%e %U %S %M' -o /tmp/vs_t.$$ "$BUILD/rix" -r "$repo" -q stats >/dev/null
		cat /tmp/vs_t.$$ >>/tmp/vs_rix.$$
		/usr/bin/time -f '%e %U %S %M' -o /tmp/vs_t.$$ restic --no-cache -q -r "$repo" stats --mode raw-data >/dev/null
		cat /tmp/vs_t.$$ >>/tmp/vs_restic.$$
	done
	for tool in rix restic; do
		f=/tmp/vs_$tool.$$
		wall=$(awk '{print $1}' "$f" | median)
		cpu=$(awk '{print $2 + $3}' "$f" | median)
		rss=$(awk '{print $4 / 1024}' "$f" | median)
		count=$([ $tool = rix ] && echo "$rix_count" || echo "$restic_count")
		printf '| %s | %s | %s | %.2f | %.2f | %.0f | %s |\n' "$n" "$imib" "$tool" "$wall" "$cpu" "$rss" "$count"
	done
	rm -f /tmp/vs_rix.$$ /tmp/vs_restic.$$ /tmp/vs_t.$$
done
