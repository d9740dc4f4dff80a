#!/usr/bin/python3
"""Checks the core's include rule: the core names no model and no scheduler policy.

Models (loops, data-flow, assistants, adaptive joins, pipelines and channels)
attach to the core through src/core/extension.hpp and src/models.cpp;
scheduler policies through src/scheduler/scheduler.hpp. A core file that
includes one of their headers, directly or through other headers of this
tree, fails the check, which prints the chain of includes.

    scripts/check_includes.py [--root DIR]
    scripts/check_includes.py --self-test

Exit status 0 when the rule holds, 1 otherwise. --self-test checks the check
itself on small trees made for it: it must pass a clean core and catch a
direct include, one through a header, and a policy in src/scheduler/.
"""

import argparse
import os
import re
import sys
import tempfile

# The core: every file under these folders, and these files.
# (the core proper, the one waiting primitive, task groups and tracing)
CORE_DIRS = ["src/core", "src/wait", "src/task_group", "src/trace"]
CORE_FILES = ["include/mote/detail/worker.hpp"]

# Headers the core may not include: folders of src/ (as written in an
# #include "folder/..." line) and single headers.
FORBIDDEN_DIRS = ["loops", "dataflow", "assistant", "adaptive", "pipeline"]
FORBIDDEN_HEADERS = [
    "mote/loops.hpp", "mote/detail/loops.hpp",
    "mote/dataflow.hpp",
    "mote/assistant.hpp", "mote/detail/adaptive.hpp",
    "mote/pipeline.hpp", "mote/channel.hpp",
]
# In src/scheduler/, only the interface.
SCHEDULER_DIR = "scheduler"
SCHEDULER_INTERFACE = "scheduler/scheduler.hpp"

# Where a quoted include is looked up, in order.
INCLUDE_ROOTS = ["include", "src"]

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCE_EXT = (".cpp", ".hpp", ".h", ".cc")


def forbidden(name):
    if name in FORBIDDEN_HEADERS:
        return True
    top = name.split("/", 1)[0]
    if top in FORBIDDEN_DIRS:
        return True
    return top == SCHEDULER_DIR and name != SCHEDULER_INTERFACE


def resolve(root, name):
    for base in INCLUDE_ROOTS:
        path = os.path.join(root, base, name)
        if os.path.isfile(path):
            return path
    return None


def includes(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Comments may quote an #include (a usage example): only real lines count.
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return INCLUDE.findall(text)


def core_files(root):
    files = []
    for d in CORE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(SOURCE_EXT)]
    files += [os.path.join(root, f) for f in CORE_FILES if os.path.isfile(os.path.join(root, f))]
    return files


def violations(root, start):
    """Chains of includes from `start` that end at a forbidden header."""
    found = []
    seen = set()
    stack = [(start, [])]
    while stack:
        path, chain = stack.pop()
        for name in includes(path):
            if forbidden(name):
                found.append(chain + [name])
                continue
            target = resolve(root, name)
            if target is None or target in seen:
                continue
            seen.add(target)
            stack.append((target, chain + [name]))
    return found


def check(root, quiet=False):
    """Prints every violation under root; the number of them."""
    bad = 0
    for f in core_files(root):
        for chain in violations(root, f):
            bad += 1
            if not quiet:
                print("%s includes %s" % (os.path.relpath(f, root), " -> ".join(chain)))
    return bad


def self_test():
    def count(files):
        with tempfile.TemporaryDirectory(prefix="check_includes.") as d:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
                with open(os.path.join(d, path), "w", encoding="utf-8") as f:
                    f.write(text)
            return check(d, quiet=True)

    base = {
        "src/core/worker.cpp": '#include "mote/detail/worker.hpp"\n#include "scheduler/scheduler.hpp"\n',
        "include/mote/detail/worker.hpp": '// see #include "loops/loops.hpp" in a comment\n',
        "src/scheduler/scheduler.hpp": "",
        "src/loops/loops.hpp": "",
        "src/scheduler/delegation.hpp": "",
        "include/mote/detail/adaptive.hpp": "",
    }
    cases = [
        ("a clean core", {}, 0),
        ("a direct include", {"src/core/a.cpp": '#include "loops/loops.hpp"\n'}, 1),
        ("an include through a header",
         {"include/mote/detail/worker.hpp": '#include "mote/detail/x.hpp"\n',
          "include/mote/detail/x.hpp": '#include "mote/detail/adaptive.hpp"\n'}, 2),
        ("a policy", {"src/core/b.cpp": '#include "scheduler/delegation.hpp"\n'}, 1),
    ]
    failed = 0
    for name, extra, want in cases:
        files = dict(base)
        files.update(extra)
        # Through worker.hpp: it and the core file that includes it.
        got = count(files)
        if got != want:
            print("check_includes self-test: %s: %d violations, expected %d" % (name, got, want), file=sys.stderr)
            failed += 1
    if failed == 0:
        print("check_includes self-test: %d cases pass" % len(cases))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    root = os.path.abspath(args.root)
    files = core_files(root)
    if not files:
        print("check_includes: no core files under " + ", ".join(CORE_DIRS), file=sys.stderr)
        return 1
    bad = check(root)
    if bad:
        print("check_includes: %d include(s) of a model or a scheduler policy from the core "
              "(see docs/design.md)" % bad, file=sys.stderr)
        return 1
    print("check_includes: %d core files include no model and no policy" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
