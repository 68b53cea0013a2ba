#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every unit test; then again built
# with AddressSanitizer + UBSan; then the concurrency tests with ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
run() { # name, cmake args...
	local dir=$1; shift
	echo "== $dir: build"
	cmake -S . -B "$dir" "$@" >/dev/null
	cmake --build "$dir" -j"$jobs" >/dev/null
	echo "== $dir: test"
	(cd "$dir" && ctest --output-on-failure -j"$jobs")
}
run build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
run build-asan -DCMAKE_BUILD_TYPE=Debug -DRIX_SANITIZE=address,undefined -DRIX_BUILD_BENCH=OFF
run build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRIX_SANITIZE=thread -DRIX_BUILD_BENCH=OFF
echo "== all test builds passed"
