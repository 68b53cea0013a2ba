#!/usr/bin/env bash
# Restore, rix against restic 0.14, of one snapshot of a real directory (default: the copy of
# /usr/lib that vs_restic_backup.sh makes in $WORK/src; made here if missing), into an empty
# target each time. The repository (version 2, compression auto) is made once by rix's backup;
# both tools restore its snapshot. Rounds are interleaved (restic, rix, restic, ...), RUNS each,
# page cache warm, `sync` before each; medians of wall time, CPU time (user + sys), peak RSS
# (/usr/bin/time) and the bytes each read (rchar of /proc/PID/io: every read() and pread(),
# so the repository's packs, index and keys; the goal is each pack once). After the last
# round each tool's target is compared with the source (diff -r --no-dereference).
#
#   bash bench/vs_restic_restore.sh [SOURCE]       RUNS=3 BUILD=build-rel WORK=/var/tmp/rix-bench-backup
set -euo pipefail
cd "$(dirname "$0")/.."
ORIG=${1:-/usr/lib}
. bench/common.sh
bench_build rix-cli
bench_source
REPO=$WORK/repo-restore
if [ ! -f "$REPO/done" ]; then
	rm -rf "$REPO"
	"$rix" -q -r "$REPO" init
	"$rix" -q -r "$REPO" backup "$SRC" >/dev/null
	touch "$REPO/done"
fi
tar cf - "$SRC" "$REPO" 2>/dev/null | cat >/dev/null # warm the page cache
measure() { # label, target, command...: appends "wall cpu rss_kib rchar" to $WORK/restore-label
	local label=$1 target=$2; shift 2
	rm -rf "$target"
	sync
	/usr/bin/time -f '%e %U %S %M' -o "$WORK/t" bash -c '"$@" >/dev/null 2>"$0.err"; rc=$?; grep "^rchar" /proc/$$/io >"$0.io"; exit $rc' \
		"$WORK/m" "$@" || { cat "$WORK/m.err"; exit 1; }
	local rchar
	rchar=$(awk '{print $2}' "$WORK/m.io")
	awk -v r="$rchar" '{printf "%s %.2f %s %s\n", $1, $2 + $3, $4, r}' "$WORK/t" >>"$WORK/restore-$label"
}
rm -f "$WORK"/restore-restic "$WORK"/restore-rix
for ((i = 1; i <= RUNS; i++)); do
	measure restic "$WORK/target-restic" restic --no-cache -q -r "$REPO" restore latest --target "$WORK/target-restic"
	measure rix "$WORK/target-rix" "$rix" --no-cache -q -r "$REPO" restore latest --target "$WORK/target-rix"
done
# Both restored the same tree as the source (restic and rix lay a snapshot of /a/b out as a/b).
for tool in restic rix; do
	diff -r --no-dereference "$SRC" "$WORK/target-$tool/${SRC#/}" >/dev/null || { echo "$tool: the restored tree differs from the source"; exit 1; }
done
packs=$(du -sb "$REPO/data" | cut -f1)
printf 'source: %s (%s MiB, %s files); repository: %s packs, %s MiB of pack files; %s runs each, medians\n\n' \
	"$SRC" "$(du -sm "$SRC" | cut -f1)" "$(find "$SRC" -type f | wc -l)" "$(find "$REPO/data" -type f | wc -l)" \
	"$(echo "$packs / 1048576" | bc)" "$RUNS"
printf '| tool | wall s | CPU s | peak RSS MiB | MiB read | read / pack bytes |\n|---|---|---|---|---|---|\n'
for tool in restic rix; do
	f="$WORK/restore-$tool"
	w=$(cut -d' ' -f1 "$f" | median)
	c=$(cut -d' ' -f2 "$f" | median)
	r=$(cut -d' ' -f3 "$f" | median)
	b=$(cut -d' ' -f4 "$f" | median)
	printf '| %s | %s | %s | %.0f | %.0f | %.2f |\n' "$tool" "$w" "$c" "$(echo "$r / 1024" | bc -l)" \
		"$(echo "$b / 1048576" | bc -l)" "$(echo "$b / $packs" | bc -l)"
done
rm -rf "$WORK/target-restic" "$WORK/target-rix"
