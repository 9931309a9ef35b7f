#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Fails when a function in a backend (or the kit they share) is longer than 60 lines:
issue 30 keeps each step of a store small enough to read and test by itself.

  python3 scripts/function_length.py              checks the backends' folders under src/
  python3 scripts/function_length.py PATH...      checks these files or folders
  python3 scripts/function_length.py --self-test  proves the check finds what it must

A function body is a line holding only "{" after a line that is not a class, struct, enum,
namespace or initializer, up to the "}" at the same indent (clang-format's layout here).
"""
import os
import re
import sys
import tempfile

LIMIT = 60
BACKENDS = ["common", "redis", "etcd", "zookeeper", "memcached", "postgres", "mariadb"]
NOT_FUNCTIONS = ("struct", "class", "namespace", "enum", "union")


def long_functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    for i, line in enumerate(lines):
        m = re.match(r"^( *)\{$", line)
        if not m or i == 0:
            continue
        head = lines[i - 1].strip()
        if head.startswith(NOT_FUNCTIONS) or head.endswith("=") or not head:
            continue
        indent = m.group(1)
        for j in range(i + 1, len(lines)):
            if lines[j].startswith(indent + "}") and len(lines[j]) <= len(indent) + 3:
                n = j - i + 1
                if n > LIMIT:
                    found.append((path, i, n, head))
                break
    return found


def files_under(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for d, _, names in os.walk(p):
            for f in sorted(names):
                if f.endswith((".cpp", ".hpp")):
                    yield os.path.join(d, f)


def check(paths):
    found = [hit for f in files_under(paths) for hit in long_functions(f)]
    for path, line, n, head in sorted(found):
        print(f"{path}:{line}: {n} lines (over {LIMIT}): {head[:90]}", file=sys.stderr)
    return found


def self_test():
    def body(n):  # a function of n lines, "{" and "}" included
        return "{\n" + "    x();\n" * (n - 2) + "}\n"

    text = ("void fits()\n" + body(LIMIT) + "struct s\n" + body(LIMIT + 5) +
            "void too_long(int a,\n              int b)\n" + body(LIMIT + 1) +
            "    auto f = [] {\n" + "    }\n" + "void ok()\n" + body(3))
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(text)
    try:
        found = [(n, head) for _, _, n, head in long_functions(f.name)]
    finally:
        os.unlink(f.name)
    want = [(LIMIT + 1, "int b)")]
    if found != want:
        print(f"function_length.py --self-test: found {found}, want {want}", file=sys.stderr)
        return 1
    print("function_length.py --self-test: the one long function found, nothing else")
    return 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    paths = argv[1:] or [os.path.join(root, "src", b) for b in BACKENDS]
    found = check(paths)
    if found:
        return 1
    print(f"function_length.py: no function over {LIMIT} lines in {len(list(files_under(paths)))} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
