#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Checks that every source file in the repository carries the licence's SPDX line in its
# first three lines (after a shebang); with --add, adds the line where it is missing.
#
#   bash scripts/spdx.sh           list the files without it; exits 1 if there are any
#   bash scripts/spdx.sh --add     add it to them (a // comment or a # comment by file type)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
line='SPDX-License-Identifier: BSL-1.0'
add=0
[[ ${1:-} == --add ]] && add=1

# Files that carry code or build logic; docs (*.md) and LICENSE itself are not sources.
mapfile -t files < <(git ls-files --cached --others --exclude-standard |
  grep -E '\.(cpp|hpp|h|java|cmake|txt|sh|py|in|dict)$|^\.ci/run$|(^|/)CMakeLists\.txt$|^\.clang-format$|^\.gitignore$' |
  while read -r f; do [[ -f $f ]] && echo "$f"; done)

missing=()
for f in "${files[@]}"; do
  head -n 3 "$f" | grep -q "$line" || missing+=("$f")
done
if ((add)); then
  for f in "${missing[@]}"; do
    case $f in
      *.cpp|*.hpp|*.h|*.java) comment="// $line" ;;
      *) comment="# $line" ;;
    esac
    if head -n 1 "$f" | grep -q '^#!'; then
      sed -i "1a $comment" "$f"
    else
      sed -i "1i $comment" "$f"
    fi
  done
  echo "spdx.sh: added the line to ${#missing[@]} files"
  exit 0
fi
if ((${#missing[@]})); then
  printf 'spdx.sh: no "%s" line in: %s\n' "$line" "${missing[*]}" >&2
  exit 1
fi
echo "spdx.sh: all ${#files[@]} source files carry the licence line"
