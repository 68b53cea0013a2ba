#!/usr/bin/env bash
# Backup, rix against restic 0.14, on a real directory of this machine (default /usr/lib):
#   first backup into a fresh repository (both: repository version 2, compression auto),
#   then an unchanged second backup (both find the first snapshot as the parent).
# Rounds are interleaved (restic, rix, restic, rix, ...), RUNS each, with the page cache warm
# (the source is read once before); medians of wall time, CPU time (user + sys) and peak RSS
# from /usr/bin/time, and the repository's size after the first backup.
#
#   bash bench/vs_restic_backup.sh [SOURCE]       RUNS=3 BUILD=build-rel WORK=/var/tmp/rix-bench-backup
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
BUILD=${BUILD:-build-rel}
WORK=${WORK:-/var/tmp/rix-bench-backup}
SRC=${1:-/usr/lib}
export RIX_PASSWORD=bench RESTIC_PASSWORD=bench
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRIX_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target rix-cli >/dev/null
rix=$(pwd)/$BUILD/rix
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mkdir -p "$WORK"
tar cf - "$SRC" 2>/dev/null | cat >/dev/null # warm the page cache
measure() { # label, command...: appends "wall cpu rss_kib" to $WORK/label
	local label=$1; shift
	/usr/bin/time -f '%e %U %S %M' -o "$WORK/t" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; exit 1; }
	awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}' "$WORK/t" >>"$WORK/$label"
}
rm -f "$WORK"/first-* "$WORK"/second-* "$WORK"/size-*
for ((i = 1; i <= RUNS; i++)); do
	for tool in restic rix; do
		repo="$WORK/repo-$tool"
		rm -rf "$repo"
		if [ $tool = restic ]; then
			restic --no-cache -q -r "$repo" init >/dev/null
			measure first-restic restic --no-cache -q -r "$repo" backup "$SRC"
			measure second-restic restic --no-cache -q -r "$repo" backup "$SRC"
		else
			"$rix" -q -r "$repo" init
			measure first-rix "$rix" -q -r "$repo" backup "$SRC"
			measure second-rix "$rix" -q -r "$repo" backup "$SRC"
		fi
		du -sm "$repo" | cut -f1 >>"$WORK/size-$tool"
	done
done
bytes=$(du -sm "$SRC" 2>/dev/null | cut -f1)
printf 'source: %s (%s MiB), %s runs each, medians\n\n' "$SRC" "$bytes" "$RUNS"
printf '| backup | tool | wall s | CPU s | peak RSS MiB | repository MiB |\n|---|---|---|---|---|---|\n'
for phase in first second; do
	for tool in restic rix; do
		f="$WORK/$phase-$tool"
		w=$(cut -d' ' -f1 "$f" | median)
		c=$(cut -d' ' -f2 "$f" | median)
		r=$(cut -d' ' -f3 "$f" | median)
		s=$(median <"$WORK/size-$tool")
		printf '| %s | %s | %s | %s | %.0f | %s |\n' "$phase" "$tool" "$w" "$c" "$(echo "$r / 1024" | bc -l)" "$s"
	done
done
