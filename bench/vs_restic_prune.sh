#!/usr/bin/env bash
# Prune, rix against restic 0.14 (issue 12), on synthetic repositories of N data blobs made by
# rix-mkrepo's prune mode (bench/mkrepo.c): every pack file present, sparse, of the size the
# index gives; SNAPSHOTS successive snapshots whose real trees reference a share USED of the
# packs whole (the rest unreferenced, so that nothing data must be repacked; the last snapshot
# references every used blob). Each repository is made once per N (kept under $WORK).
# Each run, interleaved (restic, rix), on fresh copies of the repository ($COPY, `sync` after):
#   prune                         restic --no-cache prune         rix --no-cache prune
#   forget --keep-last 1 --prune  (the older snapshots' trees: real tree packs repacked)
# Wall time, CPU time (user + sys) and peak RSS from /usr/bin/time; the bytes freed (the sum of
# the copy's file sizes before and after), which must agree within 1% between the tools (the
# run stops otherwise); the figures both print are compared, and the pack files left (a repack
# may write its blobs into a different number of packs). Prints the machine, then a Markdown
# table of medians and the ratios restic / rix (the targets: 4 or more for time and memory).
#
#   bash bench/vs_restic_prune.sh [N ...]     default: 3000000
#   RUNS=3 SNAPSHOTS=10 USED=0.7 BUILD=build-rel WORK=/var/tmp/rix-bench-prune COPY='cp -a'
#
# N = real: a real repository instead, made once by restic 0.14 from the backup benchmark's data
# set (REAL_SOURCE, default /usr/lib, copied under $WORK): a first backup; then every 7th file
# removed and every 11th appended to, a second; then every 5th of the rest removed and 64 MiB of
# new random files added, a third. `prune` then has little to do (the fixed costs: index, trees,
# listing), `forget --keep-last 1 --prune` frees the removed files' data and repacks the packs
# they shared with kept data (compressed, real blobs: reading, decrypting, writing).
#
# Disk: each copy is the index, the trees and one (sparse, empty) file per 16 blobs; creating
# files is what copying costs (COPY='cp -al' links the files instead: far faster, but unlinking
# a linked file is cheaper than freeing an inode, and restic chmods each file it removes, so the
# master copy's modes change).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-/var/tmp/rix-bench-prune}
. bench/common.sh
SNAPSHOTS=${SNAPSHOTS:-10}
USED=${USED:-0.7}
COPY=${COPY:-cp -a}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(3000000)
bench_build rix-cli rix-mkrepo
mkdir -p "$WORK"
start=$(date +%s)
bench_machine
printf 'snapshots %s, used %s of the packs, %s runs each, copies by '%s', medians\n\n' "$SNAPSHOTS" "$USED" "$RUNS" "$COPY"

repo_bytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}'; }
# The figures both tools print for a prune (restic's printPruneStats without -v).
figures() { grep -E '^(to repack|this removes|to delete|total prune|remaining|unused size after)' "$1" || true; }
# label, copy, command...: appends "wall cpu rss_kib freed packs_left" to $WORK/res-label.
measure() {
	local label=$1 copy=$2; shift 2
	local before after
	before=$(repo_bytes "$copy")
	sync
	/usr/bin/time -f '%e %U %S %M' -o "$WORK/t" "$@" >"$WORK/out-$label" 2>&1 || { cat "$WORK/out-$label"; exit 1; }
	after=$(repo_bytes "$copy")
	awk -v f=$((before - after)) -v p="$(find "$copy/data" -type f | wc -l)" \
		'{printf "%s %.2f %s %s %s\n", $1, $2 + $3, $4, f, p}' "$WORK/t" >>"$WORK/res-$label"
}
# op: both tools' last results agree: bytes freed within 1% (else exit), the same figures
# printed (else the difference is shown), the same pack files left (else noted).
agree() {
	local op=$1 a b
	a=$(tail -n1 "$WORK/res-$op-restic")
	b=$(tail -n1 "$WORK/res-$op-rix")
	# On the real repository restic's repack compresses the blobs it keeps again (Go's zstd),
	# while rix copies compressed blobs as they are stored: where restic's new frames differ in
	# size from the old ones, their new packs differ by a fraction of what was repacked, so there
	# the difference is noted; the figures both print (compared below) must agree.
	if ! awk -v a="$a" -v b="$b" -v op="$op" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		d = x[4] - y[4]; if (d < 0) d = -d
		m = x[4] > y[4] ? x[4] : y[4]
		if (m > 0 && d > m / 100) { printf "%s: bytes freed differ: restic %s, rix %s\n", op, x[4], y[4]; exit 1 }
	}'; then
		[ "$n" = real ] || exit 1
		notes+="N = real, run $i, $op: bytes freed on disk: restic $(echo "$a" | cut -d' ' -f4), rix $(echo "$b" | cut -d' ' -f4) (restic's repack compresses again)\n"
	fi
	# A repack may write its kept blobs into a different number of new packs: noted, not fatal.
	if [ "$(echo "$a" | cut -d' ' -f5)" != "$(echo "$b" | cut -d' ' -f5)" ]; then
		notes+="N = $n, run $i, $op: pack files left: restic $(echo "$a" | cut -d' ' -f5), rix $(echo "$b" | cut -d' ' -f5)\n"
	fi
	if ! diff <(figures "$WORK/out-$op-restic") <(figures "$WORK/out-$op-rix") >"$WORK/figures.diff"; then
		echo "$op: the printed figures differ (restic <, rix >):"
		cat "$WORK/figures.diff"
	fi
}

# The real repository (see the header), made by restic: three backups of a changing copy.
make_real() {
	local repo=$1 src="$WORK/real-src"
	rm -rf "$repo" "$src"
	mkdir -p "$src"
	cp -a "${REAL_SOURCE:-/usr/lib}/." "$src/" 2>/dev/null || true
	local t0
	t0=$(date +%s)
	restic --no-cache -q -r "$repo" init >/dev/null
	restic --no-cache -q -r "$repo" backup --host bench "$src" >/dev/null 2>&1 || [ $? = 3 ]
	find "$src" -type f | sort | awk 'NR % 7 == 0' | xargs -d '\n' rm -f
	find "$src" -type f | sort | awk 'NR % 11 == 0' | while IFS= read -r f; do
		[ -w "$f" ] && head -c 4096 /dev/urandom >>"$f"
	done
	restic --no-cache -q -r "$repo" backup --host bench "$src" >/dev/null 2>&1 || [ $? = 3 ]
	find "$src" -type f | sort | awk 'NR % 5 == 0' | xargs -d '\n' rm -f
	mkdir -p "$src/new"
	for i in $(seq 1 16); do head -c $((4 << 20)) /dev/urandom >"$src/new/$i"; done
	restic --no-cache -q -r "$repo" backup --host bench "$src" >/dev/null 2>&1 || [ $? = 3 ]
	rm -rf "$src"
	echo "real repository made by restic in $(($(date +%s) - t0)) s" >&2
	touch "$repo/done"
}

table='| blobs | operation | tool | wall s | CPU s | peak RSS MiB | GiB freed | packs left |\n|---|---|---|---|---|---|---|---|\n'
ratios=''
notes=''
for n in "${sizes[@]}"; do
	repo="$WORK/repo-$n-$SNAPSHOTS-$USED"
	if [ "$n" = real ]; then
		repo="$WORK/repo-real"
		[ -f "$repo/done" ] || make_real "$repo"
	elif [ ! -f "$repo/done" ]; then
		rm -rf "$repo"
		t0=$(date +%s)
		"$BUILD/bench/rix-mkrepo" "$repo" "$n" --snapshots "$SNAPSHOTS" --used "$USED" >&2
		echo "made in $(($(date +%s) - t0)) s" >&2
		touch "$repo/done"
	fi
	sparse=$([ "$n" = real ] || echo ', sparse')
	printf 'N = %s: %s pack files, index %s MiB, repository %s MiB on disk (%s GiB of pack files%s)\n' "$n" \
		"$(find "$repo/data" -type f | wc -l)" "$(du -sm "$repo/index" | cut -f1)" "$(du -sm "$repo" | cut -f1)" \
		"$(echo "$(du -sb "$repo/data" | cut -f1) / 1073741824" | bc)" "$sparse"
	rm -f "$WORK"/res-*
	for ((i = 1; i <= RUNS; i++)); do
		for op in prune forget; do
			rm -rf "$WORK/copy-restic" "$WORK/copy-rix"
			$COPY "$repo" "$WORK/copy-restic"
			$COPY "$repo" "$WORK/copy-rix"
			if [ $op = prune ]; then
				measure prune-restic "$WORK/copy-restic" restic --no-cache -r "$WORK/copy-restic" prune
				measure prune-rix "$WORK/copy-rix" "$rix" --no-cache -r "$WORK/copy-rix" prune
			else
				measure forget-restic "$WORK/copy-restic" restic --no-cache -r "$WORK/copy-restic" forget --keep-last 1 --prune
				measure forget-rix "$WORK/copy-rix" "$rix" --no-cache -r "$WORK/copy-rix" forget --keep-last 1 --prune
			fi
			agree $op
		done
	done
	rm -rf "$WORK/copy-restic" "$WORK/copy-rix"
	for op in prune forget; do
		name=$([ $op = prune ] && echo prune || echo 'forget --keep-last 1 --prune')
		for tool in restic rix; do
			f="$WORK/res-$op-$tool"
			w=$(cut -d' ' -f1 "$f" | median)
			c=$(cut -d' ' -f2 "$f" | median)
			r=$(cut -d' ' -f3 "$f" | median)
			b=$(cut -d' ' -f4 "$f" | median)
			p=$(cut -d' ' -f5 "$f" | median)
			eval "w_$tool=$w r_$tool=$r"
			table+=$(printf '| %s | %s | %s | %s | %s | %.0f | %.3f | %s |' "$n" "$name" "$tool" "$w" "$c" \
				"$(echo "$r / 1024" | bc -l)" "$(echo "$b / 1073741824" | bc -l)" "$p")'\n'
		done
		# shellcheck disable=SC2154 # set by the eval above
		ratios+=$(printf 'N = %s, %s: wall restic / rix = %.2f, peak RSS restic / rix = %.2f' "$n" "$name" \
			"$(echo "$w_restic / $w_rix" | bc -l)" "$(echo "$r_restic / $r_rix" | bc -l)")'\n'
	done
done
printf '\n%b\n%b' "$table" "$ratios"
[ -z "$notes" ] || printf '\n%b' "$notes"
printf '\n(bytes freed within 1%% in every synthetic run; whole script: %s s)\n' "$(($(date +%s) - start))"
