#!/usr/bin/env bash
# The main job: install what is missing, build (Release), run the index benchmark summary.
# Until the repository layer exists, rix's main job is measuring its in-memory index.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRIX_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target rix-bench >/dev/null
exec ./build/bench/rix-bench -summary "$@"
