#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The api_docs test: runs doxygen over the public headers (the Doxyfile cmake/docs.cmake
# configured) into OUT and fails if it warns, e.g. about an undocumented public entity, or if
# an operation or class lacks one of its fixed sections (scripts/api_sections.py, on the XML).
# Missing doxygen fails too: the test run needs it (bash scripts/setup.sh --tests).
#
#   bash scripts/api_docs.sh DOXYGEN DOXYFILE OUT
set -euo pipefail
doxygen=${1:-} doxyfile=${2:?Doxyfile} out=${3:?output directory}
if [[ -z $doxygen ]] || ! command -v "$doxygen" >/dev/null 2>&1; then
  echo "api_docs: doxygen is not installed (Debian: bash scripts/setup.sh --tests installs it)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
log=$out/warnings.log
# The same settings, written elsewhere, every warning to the log, and XML for the sections'
# check (doxygen takes a setting's last value).
start=$(date +%s.%N)
{ cat "$doxyfile"; printf 'OUTPUT_DIRECTORY = %s\nWARN_LOGFILE = %s\nGENERATE_XML = YES\n' "$out" "$log"; } |
  "$doxygen" -
end=$(date +%s.%N)
[[ -f $out/html/index.html ]] || { echo "api_docs: doxygen wrote no $out/html/index.html" >&2; exit 1; }
count=$(grep -c 'warning:' "$log" || true)
awk -v s="$start" -v e="$end" -v n="$count" 'BEGIN { printf "api_docs: doxygen took %.1f s, %d warnings\n", e - s, n }'
status=0
if [[ -s $log ]]; then
  cat "$log" >&2
  echo "api_docs: document every public entity; see the warnings above" >&2
  status=1
fi
if ! python3 "$(dirname "${BASH_SOURCE[0]}")/api_sections.py" "$out/xml" >&2; then
  echo "api_docs: give each operation and class its fixed sections (docs/api.dox lists them)" >&2
  status=1
fi
exit $status
