#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Builds dlock and runs every test: unit, integration (each starts its own redis-server) and
# the CMake consumer tests. Exits non-zero if anything fails.
#
#   bash scripts/test.sh                 RelWithDebInfo build in ./build
#   bash scripts/test.sh --sanitize      AddressSanitizer + UBSan build in ./build-asan
#   bash scripts/test.sh --build-dir D   build in D instead (also: DLOCK_BUILD_DIR=D)
#
# Builds with 2 jobs (DLOCK_JOBS overrides); tests run one at a time because they start
# servers and measure timeouts.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

sanitize=0
build_dir=${DLOCK_BUILD_DIR:-}
while (($#)); do
  case $1 in
    --sanitize) sanitize=1 ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ && !/SPDX/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

bash scripts/setup.sh --tests

args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_EXAMPLES=ON -DDLOCK_BUILD_BENCH=ON)
if ((sanitize)); then
  build_dir=${build_dir:-build-asan}
  args+=(-DDLOCK_SANITIZE=address,undefined)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
  build_dir=${build_dir:-build}
  args+=(-DDLOCK_SANITIZE=)
fi
if command -v ccache >/dev/null 2>&1; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths relative to the checkout, so another clone of the same code hits the cache.
  export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=true
fi

cmake -S . -B "$build_dir" "${args[@]}"
cmake --build "$build_dir" --parallel "${DLOCK_JOBS:-2}"
cd "$build_dir"
ctest --output-on-failure -j1
