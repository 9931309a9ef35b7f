#!/usr/bin/env bash
# Builds and runs the demo: a throwaway redis-server, one dlock connection, 10,000 requests
# from 100 coroutines pipelined into a few socket writes.
#   bash scripts/demo.sh [--build-dir D]     (default ./build; also DLOCK_BUILD_DIR=D)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build_dir=${DLOCK_BUILD_DIR:-build}
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    *) echo "demo.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

bash scripts/setup.sh
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_EXAMPLES=ON)
if command -v ccache >/dev/null 2>&1; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" "${args[@]}"
cmake --build "$build_dir" --parallel "${DLOCK_JOBS:-2}" --target pipeline_demo
# The demo caps itself at 60 s; timeout is the backstop should it ever hang.
timeout 120 "$build_dir/example/pipeline_demo"
