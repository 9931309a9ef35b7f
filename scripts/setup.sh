#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Installs what dlock needs on Debian bookworm (as root, or through sudo): the build and the
# Redis path (what the demo needs); with --tests also the servers the tests start.
# Idempotent: when every package is already installed it does nothing, without network.
#
#   bash scripts/setup.sh           build + Redis (the demo)
#   bash scripts/setup.sh --tests   and every store the tests run against
set -euo pipefail

packages=(
  cmake g++ make ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-test1.81-dev
  libhiredis-dev libssl-dev openssl
  redis-server redis-tools
)
# The tests' own servers, one line per store; clang and its libFuzzer runtime for the fuzzers;
# python3 for the docs' link check, doxygen for the API reference's check (api_docs).
test_packages=(
  etcd-server etcd-client
  memcached
  postgresql libpq-dev
  mariadb-server libmariadb-dev
  zookeeper libzookeeper-st-dev default-jdk-headless libcurator-recipes-java libslf4j-java
  clang libclang-rt-14-dev
  python3
  doxygen
)

case ${1:-} in
  --tests) packages+=("${test_packages[@]}") ;;
  "") ;;
  *) echo "setup.sh: unknown argument $1 (expected --tests or nothing)" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup.sh: no dpkg-query: not a Debian system; install these yourself: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "setup.sh: all ${#packages[@]} packages are installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup.sh: missing packages (${missing[*]}) and neither root nor sudo to install them" >&2
  exit 1
fi

echo "setup.sh: installing ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
