#!/usr/bin/env python3
"""Compares the dynamic symbols of mote's libgomp.so.1 with GNU's.

    tools/omp/check_abi.py OURS [GNU]

GNU defaults to /usr/lib/x86_64-linux-gnu/libgomp.so.1. Both must define the
same (symbol, version, default-or-not) triples (objdump -T) and the same
version nodes with the same parents (objdump -p), so that every binary linked
against GNU's library finds what it needs in ours. Prints what differs and
exits 1; exits 77 (a skipped test for ctest) when GNU's library or objdump is
missing.
"""

import os
import re
import shutil
import subprocess
import sys

GNU_DEFAULT = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
SKIP = 77


def objdump(*args):
    return subprocess.run(["objdump", *args], check=True, capture_output=True, text=True).stdout


def symbols(path):
    """{(name, version, is_default)} of the functions and objects it defines."""
    out = set()
    # address flags section size version name; a version in parentheses is
    # hidden: not the default one of its name.
    pattern = re.compile(r"^[0-9a-f]+\s+(.{7})\s+(\S+)\s+[0-9a-f]+\s+(\(?[A-Za-z0-9_.]+\)?)\s+(\S+)$")
    for line in objdump("-T", path).splitlines():
        m = pattern.match(line)
        if not m:
            continue
        flags, section, version, name = m.groups()
        if section == "*UND*" or section == "*ABS*":  # imports; version nodes (compared below)
            continue
        hidden = version.startswith("(")
        out.add((name, version.strip("()"), not hidden))
    return out


def version_nodes(path):
    """{node: parent or None} from the version definitions."""
    nodes = {}
    current = None
    in_defs = False
    for line in objdump("-p", path).splitlines():
        if line.startswith("Version definitions:"):
            in_defs = True
            continue
        if in_defs:
            if not line.strip() or line.startswith("Version References"):
                break
            m = re.match(r"^\d+\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+(\S+)$", line)
            if m:
                current = m.group(1)
                nodes[current] = None
            elif current is not None and line.strip():
                nodes[current] = line.split()[0]
    # The first definition is the file's own name (the soname).
    return {k: v for k, v in nodes.items() if not k.startswith("lib")}


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    ours = sys.argv[1]
    gnu = sys.argv[2] if len(sys.argv) == 3 else GNU_DEFAULT
    if shutil.which("objdump") is None:
        print("check_abi: no objdump (apt-get install binutils): skipped")
        return SKIP
    if not os.path.exists(gnu):
        print("check_abi: GNU's libgomp.so.1 is not at %s: skipped" % gnu)
        return SKIP
    if not os.path.exists(ours):
        print("check_abi: %s does not exist" % ours, file=sys.stderr)
        return 1

    failed = False
    ours_syms, gnu_syms = symbols(ours), symbols(gnu)
    missing = sorted(gnu_syms - ours_syms)
    extra = sorted(ours_syms - gnu_syms)
    for name, version, default in missing:
        print("missing: %s@%s%s" % (name, "@" if default else "", version))
    for name, version, default in extra:
        print("not in GNU's: %s@%s%s" % (name, "@" if default else "", version))
    failed |= bool(missing or extra)

    ours_nodes, gnu_nodes = version_nodes(ours), version_nodes(gnu)
    for node in sorted(set(ours_nodes) | set(gnu_nodes)):
        if node not in ours_nodes:
            print("missing version node: %s" % node)
            failed = True
        elif node not in gnu_nodes:
            print("version node not in GNU's: %s" % node)
            failed = True
        elif ours_nodes[node] != gnu_nodes[node]:
            print("version node %s: parent %s, GNU's %s" % (node, ours_nodes[node], gnu_nodes[node]))
            failed = True

    soname = re.search(r"SONAME\s+(\S+)", objdump("-p", ours))
    if not soname or soname.group(1) != "libgomp.so.1":
        print("soname: %s, not libgomp.so.1" % (soname.group(1) if soname else "none"))
        failed = True

    if failed:
        print("check_abi: %s differs from %s" % (ours, gnu))
        return 1
    print("check_abi: %d symbols and %d version nodes, as in %s" % (len(ours_syms), len(ours_nodes), gnu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
