#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The Debian packages as a user gets them: builds them (scripts/package.sh: a full build,
# twice, so only behind -DDLOCK_PACKAGE_TEST=ON), installs them with apt, checks what each
# holds, then builds and runs the consumers against the installed files only: with
# pkg-config (shared libraries), against the static library, and with find_package(dlock).
# Packages that were not installed before are purged at the end. Needs root (or sudo).
#   bash test/package/debian_test.sh [--no-build]
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/dlock-package-test.XXXXXX)
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  as_root=(sudo)
fi
pkgs=(libdlock0.1 libdlock-dev dlock-tools)
installed_before=()
for p in "${pkgs[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]]; then
    installed_before+=("$p")
  fi
done
cleanup() {
  if ((${#installed_before[@]} == 0)); then
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive dpkg --purge "${pkgs[@]}" >/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "debian_test: $*" >&2
  exit 1
}

# --no-build: test the packages already in dist/ (from scripts/package.sh).
if [[ ${1:-} != --no-build ]]; then
  bash "$here/scripts/package.sh" -j2
fi
version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
for p in "${pkgs[@]}"; do
  ls "$here/dist/${p}_${version}_"*.deb >/dev/null || fail "no ${p} package in dist/"
done
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  "$here"/dist/libdlock0.1_"$version"_*.deb "$here"/dist/libdlock-dev_"$version"_*.deb \
  "$here"/dist/dlock-tools_"$version"_*.deb

# What each package holds.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$arch
dpkg -L libdlock0.1 | grep -q "$libdir/libdlock_core.so.0.1" || fail "libdlock0.1 lacks libdlock_core.so.0.1"
dpkg -L libdlock0.1 | grep -q "$libdir/libdlock_redis.so.0.1" || fail "libdlock0.1 lacks libdlock_redis.so.0.1"
for f in /usr/include/dlock/version.hpp /usr/include/dlock/redis/store.hpp "$libdir/libdlock_core.a" \
  "$libdir/libdlock_core.so" "$libdir/cmake/dlock/dlock-config.cmake" "$libdir/pkgconfig/dlock.pc" \
  "$libdir/pkgconfig/dlock-redis.pc"; do
  dpkg -L libdlock-dev | grep -qx "$f" || fail "libdlock-dev lacks $f"
done
dpkg -L dlock-tools | grep -qx /usr/bin/dlock || fail "dlock-tools lacks /usr/bin/dlock"
dpkg -L dlock-tools | grep -q '^/usr/share/man/man1/dlock.1' || fail "dlock-tools lacks its man page"
dlock --version | grep -q "^dlock $version\$" || fail "dlock --version: $(dlock --version)"
zcat /usr/share/man/man1/dlock.1.gz | grep -q "^.TH DLOCK 1 .*\"dlock $version\"" || fail "man page .TH"

# pkg-config alone (no PKG_CONFIG_PATH): the shared libraries.
unset PKG_CONFIG_PATH
g++ "$here/test/cmake/consumer.cpp" -o "$work/pc_consumer" $(pkg-config --cflags --libs dlock)
g++ "$here/test/cmake/core_consumer.cpp" -o "$work/pc_core_consumer" $(pkg-config --cflags --libs dlock-core)
ldd "$work/pc_consumer" | grep -q "libdlock_redis.so.0.1 => .*/lib/$arch/libdlock_redis.so.0.1" || fail "pc_consumer does not load the installed .so"
"$work/pc_consumer"
"$work/pc_core_consumer"

# The static library: the core consumer linked with the archive itself.
g++ "$here/test/cmake/core_consumer.cpp" -o "$work/static_core_consumer" $(pkg-config --cflags dlock-core) \
  "$libdir/libdlock_core.a" -pthread
ldd "$work/static_core_consumer" | grep -q libdlock && fail "static_core_consumer loads a shared libdlock"
"$work/static_core_consumer"

# find_package(dlock) from the system prefix.
cmake -S "$here/test/cmake/find_package" -B "$work/cmake" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/cmake" --parallel 2 >/dev/null
"$work/cmake/consumer"
"$work/cmake/core_consumer"

echo "debian_test: packages:"
for d in "$here"/dist/*.deb; do
  printf '  %-45s %8d bytes, installed %s KiB\n' "$(basename "$d")" "$(stat -c %s "$d")" \
    "$(dpkg-deb -f "$d" Installed-Size)"
done
echo "debian_test: ok"
