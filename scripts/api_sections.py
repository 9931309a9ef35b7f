#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Checks the API reference's fixed sections in doxygen's XML output (docs/Doxyfile.in's ALIASES).

Every public asynchronous operation (a member function template with a `Token` parameter)
documents @completion, @errors and @cancellation; every class documents @threadsafety.
Doxygen itself only warns about what is not documented at all.

    python3 scripts/api_sections.py XML_DIR     prints each missing section; exits 1 if any
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET

OPERATION = ('Completion signature', 'Errors', 'Cancellation')
CLASS = ('Thread safety',)


def titles(node):
    return {t.text for t in node.iter('title')} if node is not None else set()


def where(node):
    loc = node.find('location')
    return f"{loc.get('file')}:{loc.get('line')}" if loc is not None else '?'


def main(xml_dir):
    missing = []
    for path in sorted(glob.glob(os.path.join(xml_dir, '*.xml'))):
        root = ET.parse(path).getroot()
        for c in root.iter('compounddef'):
            name = c.findtext('compoundname', '')
            if c.get('kind') not in ('class', 'struct') or '::detail' in name:
                continue
            if c.get('kind') == 'class':
                got = titles(c.find('detaileddescription'))
                missing += [f'{where(c)}: {name}: no @threadsafety' for t in CLASS if t not in got]
            for m in c.iter('memberdef'):
                if m.get('kind') != 'function' or m.get('prot') != 'public':
                    continue
                params = m.findall('templateparamlist/param/type')
                if not any((p.text or '').strip() == 'class Token' for p in params):
                    continue
                got = titles(m.find('detaileddescription'))
                for t in OPERATION:
                    if t not in got:
                        missing.append(f"{where(m)}: {name}::{m.findtext('name')}: no section '{t}'")
    for line in missing:
        print(line)
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
