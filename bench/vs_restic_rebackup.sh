#!/usr/bin/env bash
# An unchanged re-backup into a large repository, rix against restic 0.14 (issue 13): what a
# nightly backup of a small, unchanged directory costs when the repository already holds N
# blobs. The repository is bench/mkrepo.c's index-only one of N data blobs (kept under $WORK),
# plus a first backup of SOURCE (default /usr/share/doc, copied under $WORK) by restic, so that
# both tools find that snapshot as the parent and store nothing new. Then RUNS rounds,
# interleaved (restic, rix), of `backup SOURCE` with --no-cache (restic loads every index file
# in full; rix loads data blobs as IDs only, its dedup-only index): wall time, CPU time
# (user + sys) and peak RSS from /usr/bin/time; after each backup the repository is forgotten
# back to one snapshot (no prune: nothing was added; every snapshot names the same trees), so
# every round starts from the same repository. Prints
# the machine, then a Markdown table of medians and the ratios restic / rix.
#
#   bash bench/vs_restic_rebackup.sh [N ...]      default: 10000000
#   RUNS=3 BUILD=build-rel WORK=/var/tmp/rix-bench-rebackup SOURCE=/usr/share/doc
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-/var/tmp/rix-bench-rebackup}
. bench/common.sh
ORIG=${SOURCE:-/usr/share/doc}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000000)
bench_build rix-cli rix-mkrepo
bench_source
bench_machine
printf 'source %s (%s files, %s MiB), %s runs each, medians\n\n' "$ORIG" "$(find "$SRC" -type f | wc -l)" \
	"$(du -sm "$SRC" | cut -f1)" "$RUNS"
t=$WORK/time
printf '| blobs | tool | wall s | CPU s | peak RSS MiB |\n|---|---|---|---|---|\n'
for n in "${sizes[@]}"; do
	repo=$WORK/repo-$n
	if [ ! -f "$WORK/repo-$n.done" ]; then
		rm -rf "$repo"
		"$BUILD/bench/rix-mkrepo" "$repo" "$n" >&2
		restic --no-cache -q -r "$repo" backup "$SRC" >&2 # the parent both find
		touch "$WORK/repo-$n.done"
	fi
	: >"$t.restic"; : >"$t.rix"
	for ((i = 0; i < RUNS; i++)); do
		for tool in restic rix; do
			sync
			if [ $tool = restic ]; then
				/usr/bin/time -f '%e %U %S %M' -o "$t" restic --no-cache -q -r "$repo" backup "$SRC" >"$WORK/out" 2>&1 ||
					{ cat "$WORK/out"; exit 1; }
			else
				/usr/bin/time -f '%e %U %S %M' -o "$t" "$rix" --no-cache -q -r "$repo" backup "$SRC" >"$WORK/out" 2>&1 ||
					{ cat "$WORK/out"; exit 1; }
			fi
			cat "$t" >>"$t.$tool"
			# Back to one snapshot: nothing was stored, nothing to prune.
			restic --no-cache -q -r "$repo" forget --keep-last 1 --group-by '' >/dev/null 2>&1 ||
				{ echo "forget failed"; exit 1; }
			restic --no-cache -q -r "$repo" snapshots --json | python3 -c 'import json,sys; assert len(json.load(sys.stdin)) == 1'
		done
	done
	for tool in restic rix; do
		f=$t.$tool
		printf '| %s | %s | %.2f | %.2f | %.0f |\n' "$n" "$tool" "$(awk '{print $1}' "$f" | median)" \
			"$(awk '{print $2 + $3}' "$f" | median)" "$(echo "$(awk '{print $4}' "$f" | median) / 1024" | bc -l)"
	done
	awk '{print $1}' "$t.restic" | median >"$t.rw"; awk '{print $1}' "$t.rix" | median >"$t.xw"
	awk '{print $4}' "$t.restic" | median >"$t.rm"; awk '{print $4}' "$t.rix" | median >"$t.xm"
	printf '\nrestic / rix at %s blobs: wall %.2fx, peak RSS %.2fx\n\n' "$n" \
		"$(echo "$(cat "$t.rw") / $(cat "$t.xw")" | bc -l)" "$(echo "$(cat "$t.rm") / $(cat "$t.xm")" | bc -l)"
	rm -f "$t".*
done
