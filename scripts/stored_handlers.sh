#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Fails when a raw boost::asio::any_completion_handler is STORED (a data member, a struct
# field, a container or std::optional element): on Boost 1.81 its move assignment recurses
# until the stack is gone, so std::swap, optional assignment and a vector's erase crash.
# Store a dlock::detail::stored_handler (src/common/stored_handler.hpp) instead. Parameters,
# locals with an initializer and std::make_shared / unique_ptr / shared_ptr of one are fine.
#
#   bash scripts/stored_handlers.sh              checks src/ and include/
#   bash scripts/stored_handlers.sh PATH...      checks these files or directories
#   bash scripts/stored_handlers.sh --self-test FILE
#                       reports exactly FILE's lines marked "// stored" (the check's own test)
set -euo pipefail
if [[ ${1:-} == --self-test ]]; then
  want=$(grep -n '// stored$' "$2" | cut -d: -f1 | sort -n | tr '\n' ' ')
  got=$(bash "$0" "$2" 2>&1 >/dev/null | grep -oP '^[^:]+:\K[0-9]+(?=:)' | sort -nu | tr '\n' ' ' || true)
  if [[ -z $want || $want != "$got" ]]; then
    echo "stored_handlers.sh --self-test: lines marked: ${want:-none}; lines reported: ${got:-none}" >&2
    exit 1
  fi
  echo "stored_handlers.sh --self-test: all $(wc -w <<<"$want") marked lines reported, nothing else"
  exit 0
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
paths=("$@")
((${#paths[@]})) || paths=(src include)

mapfile -t files < <(for p in "${paths[@]}"; do
  if [[ -d $p ]]; then find "$p" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.ipp' \); else echo "$p"; fi
done | grep -v 'src/common/stored_handler\.hpp$' | sort)

ach='(?:(?:boost::)?asio::)?any_completion_handler<'
# Aliases of the type (`using done_handler = asio::any_completion_handler<...>;`) are checked too.
mapfile -t aliases < <(grep -hoP "\busing\s+\K\w+(?=\s*=\s*(?:typename\s+)?$ach)" "${files[@]}" /dev/null | sort -u)
types=("$ach")
for a in "${aliases[@]}"; do types+=("\\b$a\\b(?!\\s*[<(:])"); done

bad=0
report() {  # pattern, why
  local out
  if out=$(grep -nHP "$1" "${files[@]}" /dev/null); then
    printf '%s\n' "$out" | sed "s|\$|    <- $2|" >&2
    bad=1
  fi
}
for t in "${types[@]}"; do
  # An element of a template other than the owning pointers (vector<, optional<, pair<int, ...).
  report "\\b(?!(?:shared_ptr|unique_ptr|weak_ptr|make_shared|make_unique)\\b)\\w+<[^<>;()]*$t" \
    'a stored handler in a container or wrapper: use stored_handler<...>'
  # A member or field: the type, a name, no initializer (or an empty one), end of statement.
  report "^\\s*(?:mutable\\s+)?$t(?:[^;={}]*>)?\\s+\\w+\\s*(?:\\{\\s*\\}|=\\s*(?:nullptr|\\{\\s*\\}))?\\s*;" \
    'a stored handler as a member: use stored_handler<...>'
done
if ((bad)); then
  echo 'stored_handlers.sh: raw any_completion_handler stored (its move assignment crashes on Boost 1.81)' >&2
  exit 1
fi
echo "stored_handlers.sh: ${#files[@]} files, no raw any_completion_handler stored"
