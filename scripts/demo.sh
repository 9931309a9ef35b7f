#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Builds and runs the demo: a flash sale. Worker processes full of coroutines sell a stock
# of items kept in a throwaway redis-server, once with dlock and once without a lock.
#   bash scripts/demo.sh [--build-dir D] [flash_sale options, e.g. --url redis://h:p --workers 8]
# (default build dir ./build; also DLOCK_BUILD_DIR=D)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build_dir=${DLOCK_BUILD_DIR:-build}
demo_args=()
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    *) demo_args+=("$1") ;;
  esac
  shift
done

bash scripts/setup.sh
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_EXAMPLES=ON)
if command -v ccache >/dev/null 2>&1; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" "${args[@]}"
cmake --build "$build_dir" --parallel "${DLOCK_JOBS:-2}" --target flash_sale
# The demo caps itself at 60 s; timeout is the backstop should it ever hang.
timeout 300 "$build_dir/example/flash_sale" "${demo_args[@]}"
