#!/usr/bin/env bash
# Backup, rix against restic 0.14, on a copy of a real directory of this machine (default
# /usr/lib, copied once to $WORK/src so that files can be touched):
#   first backup into a fresh repository (both: repository version 2, compression auto),
#   an unchanged second backup (both find the first snapshot as the parent),
#   a third after touching 1% of the files (every 100th, mtime now: read again, nothing new).
# Rounds are interleaved (restic, rix, restic, rix, ...), RUNS each, with the page cache warm;
# medians of wall time, CPU time (user + sys) and peak RSS from /usr/bin/time, and the
# repository's size after the first backup. Then, in the same run, the machine's limit for the
# same files: rix-bench's Stage/pipeline (read, chunk, SHA-256, compress and seal on every CPU,
# no walk, index or packs), and the first backup's share of it.
#
#   bash bench/vs_restic_backup.sh [SOURCE]       RUNS=3 BUILD=build-rel WORK=/var/tmp/rix-bench-backup
set -euo pipefail
cd "$(dirname "$0")/.."
ORIG=${1:-/usr/lib}
. bench/common.sh
bench_build rix-cli rix-bench
bench_source
find "$SRC" -type f | sort | awk 'NR % 100 == 0' >"$WORK/touch.list"
tar cf - "$SRC" 2>/dev/null | cat >/dev/null # warm the page cache
measure() { # label, command...: appends "wall cpu rss_kib" to $WORK/label
	local label=$1; shift
	/usr/bin/time -f '%e %U %S %M' -o "$WORK/t" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; exit 1; }
	awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}' "$WORK/t" >>"$WORK/$label"
}
rm -f "$WORK"/first-* "$WORK"/second-* "$WORK"/third-* "$WORK"/size-*
for ((i = 1; i <= RUNS; i++)); do
	for tool in restic rix; do
		repo="$WORK/repo-$tool"
		rm -rf "$repo"
		sync
		if [ $tool = restic ]; then
			restic --no-cache -q -r "$repo" init >/dev/null
			measure first-restic restic --no-cache -q -r "$repo" backup "$SRC"
			measure second-restic restic --no-cache -q -r "$repo" backup "$SRC"
			xargs -d '\n' touch <"$WORK/touch.list"
			measure third-restic restic --no-cache -q -r "$repo" backup "$SRC"
		else
			"$rix" -q -r "$repo" init
			measure first-rix "$rix" --no-cache -q -r "$repo" backup "$SRC"
			measure second-rix "$rix" --no-cache -q -r "$repo" backup "$SRC"
			xargs -d '\n' touch <"$WORK/touch.list"
			measure third-rix "$rix" --no-cache -q -r "$repo" backup "$SRC"
		fi
		du -sm "$repo" | cut -f1 >>"$WORK/size-$tool"
	done
done
rm -rf "$WORK"/repo-*
bytes=$(du -sm "$SRC" 2>/dev/null | cut -f1)
printf 'source: %s (a copy of %s, %s MiB, %s files), %s runs each, medians\n\n' "$SRC" "$ORIG" "$bytes" \
	"$(find "$SRC" -type f | wc -l)" "$RUNS"
printf '| backup | tool | wall s | CPU s | peak RSS MiB | repository MiB |\n|---|---|---|---|---|---|\n'
for phase in first second third; do
	for tool in restic rix; do
		f="$WORK/$phase-$tool"
		w=$(cut -d' ' -f1 "$f" | median)
		c=$(cut -d' ' -f2 "$f" | median)
		r=$(cut -d' ' -f3 "$f" | median)
		s=$(median <"$WORK/size-$tool")
		printf '| %s | %s | %s | %s | %.0f | %s |\n' "$phase" "$tool" "$w" "$c" "$(echo "$r / 1024" | bc -l)" "$s"
	done
done
# The limit, same files, same run.
RIX_BENCH_STAGE_DIR=$SRC RIX_BENCH_STAGE_MIB=1000000 "$BUILD/bench/rix-bench" -bench 'Stage/pipeline/' -count "$RUNS" \
	>"$WORK/limit.txt"
grep '^Benchmark' "$WORK/limit.txt"
total=$(find "$SRC" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
for t in $(grep -o 'threads=[0-9]*' "$WORK/limit.txt" | sort -u); do
	mbs=$(grep "$t" "$WORK/limit.txt" | awk '{for (i = 1; i <= NF; i++) if ($(i + 1) == "MB/s") print $i}' | median)
	w=$(cut -d' ' -f1 "$WORK/first-rix" | median)
	printf 'limit %s: %s MB/s; rix first backup %.1f MB/s = %.0f%% of it\n' "$t" "$mbs" \
		"$(echo "$total / $w / 1000000" | bc -l)" "$(echo "100 * $total / $w / 1000000 / $mbs" | bc -l)"
done
