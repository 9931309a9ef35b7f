#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Checks that the docs point at things that exist.

For README.md, bench/README.md and every .md file under docs/ (or the files given): every relative link [text](path#anchor)
names a file or folder of the repository, every #anchor a heading of its target file
(GitHub's rule for heading ids), and every path in backticks that starts with a top-level
folder of the repository (`src/core/lock_fsm.cpp`, `test/unit/`, `src/redis/connection.cpp:459`)
exists (a path without extension may name a program or module after its sources:
`bench/lock_bench`; `{a,b}` and `*` are expanded); a file named without its folder
(`lock_fsm_test.cpp`) must be the name of some file. Paths in the text of a link to another
site, and paths with placeholders (`src/<store>/`), are not checked.

    python3 scripts/check_links.py            prints each broken link or path; exits 1 if any
    python3 scripts/check_links.py FILE...    checks these Markdown files instead
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
# Top-level folders whose paths in backticks are checked; `build/...` and the like are not.
REPO_DIRS = ('src/', 'include/', 'test/', 'bench/', 'example/', 'scripts/', 'cmake/', 'docs/')
FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
REF_DEF = re.compile(r'^\s*\[[^\]]+\]:\s*(\S+)')
CODE_SPAN = re.compile(r'`([^`]+)`')
EXTERNAL_LINK = re.compile(r'\[[^\]]*\]\([a-z][a-z0-9+.-]*:[^)]*\)', re.I)


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    in_fence = False
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if not in_fence:
                yield number, line.rstrip('\n')


def slug(text):
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'<[^>]+>', '', text)                   # inline HTML
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # links keep their text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        seen = {}
        ids = set()
        for _, line in prose_lines(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else '%s-%d' % (base, n))
        with open(path, encoding='utf-8') as f:           # explicit <a name/id="..."> anchors
            ids.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', f.read()))
        _anchor_cache[path] = ids
    return _anchor_cache[path]


def check_link(doc, number, target, problems):
    if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):    # http:, https:, mailto: ...
        return
    path, _, anchor = target.partition('#')
    dest = doc if not path else os.path.normpath(os.path.join(os.path.dirname(doc), path))
    where = '%s:%d' % (os.path.relpath(doc, ROOT), number)
    if not os.path.exists(dest):
        problems.append('%s: link to a missing file: %s' % (where, target))
        return
    if anchor and dest.endswith('.md') and anchor not in anchors(dest):
        problems.append('%s: link to a missing heading: %s' % (where, target))


def expand_braces(text):
    """`src/core/lock_fsm.{hpp,cpp}` -> both paths (one level of braces)."""
    m = re.search(r'\{([^{}]*)\}', text)
    if not m:
        return [text]
    out = []
    for part in m.group(1).split(','):
        out += expand_braces(text[:m.start()] + part + text[m.end():])
    return out


_basenames = None


def repo_file_names():
    """Every file's name and its paths' tails (`redis/store.hpp`) in the source tree."""
    global _basenames
    if _basenames is None:
        _basenames = set()
        for top, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if not d.startswith(('.', 'build'))]
            rel = os.path.relpath(top, ROOT).split(os.sep)
            for f in files:
                parts = ([] if rel == ['.'] else rel) + [f]
                for i in range(len(parts)):
                    _basenames.add('/'.join(parts[i:]))
    return _basenames


def check_code_path(doc, number, span, problems):
    text = span.strip()
    bare = re.sub(r'(:\d+(-\d+)?)+$', '', text)
    if re.fullmatch(r'[\w./-]+\.(cpp|hpp|h|cmake|py|sh|md|in|java)', bare) \
            and not bare.startswith(REPO_DIRS):
        # a file named without its folder (`lock_fsm_test.cpp`): some file must have the name
        if bare not in repo_file_names():
            problems.append('%s:%d: no file named %s' % (os.path.relpath(doc, ROOT), number, bare))
        return
    if not text.startswith(REPO_DIRS) or ' ' in text:
        return
    if re.search(r'[<>$\[\]|]|\.\.\.|…', text):          # placeholders
        return
    text = re.sub(r'(:\d+(-\d+)?)+(,\s*\d+(-\d+)?)*$', '', text)  # file:line, file:10-20
    text = text.rstrip('.,;:')
    for one in expand_braces(text):
        full = os.path.join(ROOT, one)
        # `bench/lock_bench`, `test/common/server_process`: a program or module named by its
        # sources; `src/core/lease_set.*`: a pattern that must match something
        if not glob.glob(full) and not glob.glob(glob.escape(full) + '.*'):
            problems.append('%s:%d: no such path: %s' % (os.path.relpath(doc, ROOT), number, one))


def check(doc):
    problems = []
    for number, line in prose_lines(doc):
        local = EXTERNAL_LINK.sub('', line)               # another repository's paths
        for span in CODE_SPAN.findall(local):
            check_code_path(doc, number, span, problems)
        bare = CODE_SPAN.sub('', line)
        for target in LINK.findall(bare):
            check_link(doc, number, target, problems)
        m = REF_DEF.match(bare)
        if m:
            check_link(doc, number, m.group(1), problems)
    return problems


def main(argv):
    if argv:
        docs = [os.path.abspath(a) for a in argv]
    else:
        docs_dir = os.path.join(ROOT, 'docs')
        docs = [os.path.join(ROOT, 'README.md'), os.path.join(ROOT, 'bench', 'README.md')] + sorted(
            os.path.join(top, f) for top, _, files in os.walk(docs_dir) for f in files if f.endswith('.md'))
    problems = []
    for doc in docs:
        problems += check(doc)
    for p in problems:
        print(p)
    print('%d file(s) checked, %d problem(s)' % (len(docs), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
