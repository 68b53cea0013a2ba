# bench/common.sh — what vs_restic_backup.sh, vs_restic_restore.sh and vs_restic_prune.sh share,
# sourced from the top of the tree (ORIG set to the directory to copy, for bench_source): the
# settings (RUNS=3, BUILD=build-rel, WORK=/var/tmp/rix-bench-backup unless set), both tools'
# password, and:
#   bench_build TARGET...  the Release build of those targets in $BUILD; rix=its rix binary
#   bench_source           SRC=$WORK/src, a copy of $ORIG made once (again when ORIG changes),
#                          so that files can be touched
#   median                 the median of the numbers on stdin, one a line
#   bench_machine          one line on the machine: CPU model, CPUs, L2 and L3 (lscpu), memory,
#                          kernel, the load average before the run
# The scripts run rix with --no-cache, as restic: like for like (the index cache's own figures
# are vs_restic.sh's).
RUNS=${RUNS:-3}
BUILD=${BUILD:-build-rel}
WORK=${WORK:-/var/tmp/rix-bench-backup}
export RIX_PASSWORD=bench RESTIC_PASSWORD=bench

bench_build() {
	cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRIX_BUILD_TESTS=OFF >/dev/null
	cmake --build "$BUILD" -j"$(nproc)" --target "$@" >/dev/null
	rix=$(pwd)/$BUILD/rix
}

bench_source() {
	mkdir -p "$WORK"
	SRC=$WORK/src
	if [ ! -f "$WORK/src.done" ] || [ "$(cat "$WORK/src.done")" != "$ORIG" ]; then
		rm -rf "$SRC"
		mkdir -p "$SRC"
		cp -a "$ORIG/." "$SRC/" 2>/dev/null || true
		echo "$ORIG" >"$WORK/src.done"
	fi
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

bench_machine() {
	local l2 l3
	l2=$(lscpu | sed -n 's/^L2 cache: *//p')
	l3=$(lscpu | sed -n 's/^L3 cache: *//p')
	printf 'machine: "%s", %s CPUs, L2 %s, L3 %s, %s GiB of memory, Linux %s, load %s before\n' \
		"$(lscpu | sed -n 's/^Model name: *//p' | head -n1)" "$(nproc)" "${l2:-?}" "${l3:-?}" \
		"$(awk '/^MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)" "$(uname -r)" \
		"$(cut -d' ' -f1-3 /proc/loadavg)"
}
