#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Builds the Debian packages (libdlock0.1, libdlock-dev, dlock-tools) into dist/ with
# `dpkg-buildpackage -us -uc -b`, from a copy of the tree (so nothing lands next to the
# checkout). Installs the build's own needs first, only those missing (as setup.sh does).
#
#   bash scripts/package.sh [-jN]      (default: -j2)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:--j2}
packages=(
  debhelper dpkg-dev fakeroot
  cmake g++ make pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libhiredis-dev libssl-dev libzookeeper-st-dev libpq-dev libmariadb-dev
)
missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    as_root=(sudo)
  fi
  echo "package.sh: installing ${missing[*]}"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
work="$here/dist/work"
src="$work/dlock-$version"
rm -rf "$work"
mkdir -p "$src"
# The tracked and new files of the checkout (not its build directories).
(cd "$here" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$src"

start=$(date +%s)
(cd "$src" && DEB_BUILD_OPTIONS="parallel=${jobs#-j} nocheck" dpkg-buildpackage -us -uc -b)
end=$(date +%s)

rm -f "$here"/dist/*.deb
mv "$work"/*.deb "$here/dist/"
echo "package.sh: built in $((end - start)) s:"
ls -l "$here"/dist/*.deb
