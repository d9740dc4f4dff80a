#!/usr/bin/python3
"""Compiles every complete C++ program quoted in README.md and docs/*.md.

A fenced block tagged ```cpp is a complete program unless its first line is
`// fragment`; each one is compiled and linked against the headers in include/
and the library in a build directory. A block that no longer compiles fails
the check with its file and line.

    scripts/check_doc_examples.py [--build-dir build/release] [--jobs 2]
"""

import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)")


def extract_blocks(path):
    """Yields (first_line_number, language, code) for each fenced block."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [l[len(indent):] if l.startswith(indent) else l for l in lines[start:j]]
        yield start + 1, lang, "\n".join(body) + "\n"
        i = j + 1


def find_library(build_dir):
    for pattern in ("src/libmote.so", "src/libmote.a", "**/libmote.so", "**/libmote.a"):
        hits = sorted(glob.glob(os.path.join(build_dir, pattern), recursive=True))
        if hits:
            return os.path.abspath(hits[0])
    return None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(root, "build", "release"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    args = parser.parse_args()

    library = find_library(args.build_dir)
    if library is None:
        print(f"check_doc_examples: no libmote in {args.build_dir}; build it first", file=sys.stderr)
        return 2
    shared = library.endswith(".so")

    docs = [os.path.join(root, "README.md")]
    docs += sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    blocks = []
    skipped = 0
    for doc in docs:
        if not os.path.exists(doc):
            continue
        for line, lang, code in extract_blocks(doc):
            if lang not in ("cpp", "c++", "cxx"):
                continue
            first = code.lstrip().splitlines()[0].strip() if code.strip() else ""
            if first.startswith("// fragment"):
                skipped += 1
                continue
            blocks.append((os.path.relpath(doc, root), line, code))

    if not blocks:
        print(f"check_doc_examples: no complete ```cpp programs found ({skipped} fragments skipped)")
        return 0

    command = [args.cxx, "-std=c++20", "-O1", "-Wall", "-Wextra", "-Werror=return-type",
               "-I", os.path.join(root, "include"), "-pthread"]
    extra_libs = []
    if shared:
        command.append("-DMOTE_SHARED")
    else:
        # A static libmote leaves its private dependency (hwloc) to the link.
        r = subprocess.run(["pkg-config", "--libs", "hwloc"], capture_output=True, text=True)
        if r.returncode == 0:
            extra_libs = r.stdout.split()

    with tempfile.TemporaryDirectory(prefix="mote-doc-examples-") as tmp:
        def compile_block(index_block):
            index, (doc, line, code) = index_block
            source = os.path.join(tmp, f"block{index}.cpp")
            with open(source, "w", encoding="utf-8") as f:
                f.write(f'#line {line} "{doc}"\n')
                f.write(code)
            out = os.path.join(tmp, f"block{index}")
            link = [library] + extra_libs
            if shared:
                link.append("-Wl,-rpath," + os.path.dirname(library))
            r = subprocess.run(command + [source, "-o", out] + link,
                               capture_output=True, text=True)
            return doc, line, r.returncode, r.stdout + r.stderr

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(compile_block, enumerate(blocks)))

    failed = [(doc, line, output) for doc, line, rc, output in results if rc != 0]
    for doc, line, output in failed:
        print(f"FAIL {doc}:{line}: this ```cpp block does not compile "
              f"(mark it `// fragment` if it is not a complete program)\n{output}")
    print(f"check_doc_examples: {len(blocks) - len(failed)}/{len(blocks)} programs compiled, "
          f"{skipped} fragments skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
