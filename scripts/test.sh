#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every unit test; then again built
# with AddressSanitizer + UBSan; then the concurrency tests with ThreadSanitizer; and the
# Release build the main job and the benchmarks use (built, warnings as errors, not run: -O3
# inlines more, and its warnings are others).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
run() { # name, ctest -E regex (or ''), cmake args...
	local dir=$1 exclude=$2; shift 2
	echo "== $dir: build"
	cmake -S . -B "$dir" "$@" >/dev/null
	cmake --build "$dir" -j"$jobs" >/dev/null
	echo "== $dir: test"
	(cd "$dir" && ctest --output-on-failure -j"$jobs" ${exclude:+-E "$exclude"})
}
run build-test '' -DCMAKE_BUILD_TYPE=RelWithDebInfo
run build-asan '' -DCMAKE_BUILD_TYPE=Debug -DRIX_SANITIZE=address,undefined -DRIX_BUILD_BENCH=OFF
# TSan: every test but the ones that compare the rix command's output with restic's (single-
# threaded formatting, 650 CPU-seconds under TSan) and run the prune command against restic (its
# threads are test_pruner's, which TSan runs); the threaded paths (backup readers, restore
# workers, progress and signal threads, the master index, prune's walkers and repackers) keep it
# through the others.
run build-tsan '^(test_cli(|_snapshots|_browse|_forget)|test_prune(|_crash))$' -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRIX_SANITIZE=thread -DRIX_BUILD_BENCH=OFF
echo "== build-rel: Release build (main job, benchmarks)"
cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DRIX_BUILD_TESTS=OFF >/dev/null
cmake --build build-rel -j"$jobs" >/dev/null
echo "== install: pkg-config and find_package consumers"
prefix=$(mktemp -d)
cmake --install build-test --prefix "$prefix" >/dev/null
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -o "$prefix/consumer-pc" tests/install/consumer.c \
	$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs rix) -Wl,-rpath,"$prefix/lib"
"$prefix/consumer-pc"
cmake -S tests/install -B "$prefix/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/build" >/dev/null
"$prefix/build/consumer"
rm -rf "$prefix"
echo "== all test builds passed"
