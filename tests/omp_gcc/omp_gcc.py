#!/usr/bin/env python3
"""GCC 12's libgomp run tests on mote's libgomp.so.1 and on GNU's.

    omp_gcc.py fetch                       the testsuite into the cache (prints its path)
    omp_gcc.py build --build-dir DIR       select the run tests, compile them into DIR
    omp_gcc.py run --build-dir DIR --threads N --mote-dir OMPDIR
                                           run each on GNU's library and on mote's; exit 1
                                           when a test passes on GNU's and not on mote's
    omp_gcc.py list --build-dir DIR        what build selected, skipped and why

The testsuite is GCC's (GPL): it is fetched with `apt-get download gcc-12-source` into a cache
outside the repository (MOTE_OMP_GCC_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/mote/
gcc-12-testsuite) and never copied into it. README.md beside this file says how the directives
of GCC's harness are read. Standard library only.
"""

import argparse
import concurrent.futures
import fcntl
import fnmatch
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PACKAGE = "gcc-12-source"
# The directories GCC's libgomp.c/c.exp and libgomp.c++/c++.exp run (the .exp files name them).
# C: libgomp.c/**/*.c and libgomp.c-c++-common/**/*.c; C++: libgomp.c++/**/*.C and
# libgomp.c-c++-common/**/*.c again, compiled as C++.
SUITES = (
    ("c", "libgomp.c", ".c"),
    ("c", "libgomp.c-c++-common", ".c"),
    ("c++", "libgomp.c++", ".C"),
    ("c++", "libgomp.c-c++-common", ".c"),
)
# Headers of GNU's libgomp build tree (not in the testsuite): tests including them test GNU's
# internals, not the ABI a program sees.
INTERNAL_HEADERS = ("libgomp_g.h", "config.h", "gomp-constants.h")
DEFAULT_FLAGS = ["-O2"]  # the .exp files' DEFAULT_CFLAGS
DEFAULT_TIMEOUT = 60  # seconds a run may take before it counts as a hang
COMPILE_TIMEOUT = 600
OUTPUT_KEEP = 1 << 20  # bytes of a run's output kept for dg-output


def log(*parts):
    print("omp_gcc:", *parts, flush=True)


def fail(message):
    print("omp_gcc: error: " + message, file=sys.stderr, flush=True)
    sys.exit(2)


# ---- The cache ------------------------------------------------------------------------------


def cache_dir(arg=None):
    if arg:
        return os.path.abspath(arg)
    if os.environ.get("MOTE_OMP_GCC_CACHE"):
        return os.path.abspath(os.environ["MOTE_OMP_GCC_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mote", "gcc-12-testsuite")


def find_testsuite(cache):
    """<cache>/gcc-*/libgomp/testsuite when it is complete (both .exp files present)."""
    found = sorted(glob.glob(os.path.join(cache, "gcc-*", "libgomp", "testsuite", "libgomp.c++", "c++.exp")))
    for exp in reversed(found):
        testsuite = os.path.dirname(os.path.dirname(exp))
        if os.path.isfile(os.path.join(testsuite, "libgomp.c", "c.exp")):
            return testsuite
    return None


def run_checked(command, what, **kwargs):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if result.returncode != 0:
        fail("%s failed (exit %d): %s\n%s" % (what, result.returncode, " ".join(command), result.stdout[-4000:]))
    return result.stdout


def fetch(cache):
    """The testsuite's directory; downloads and unpacks it into the cache when it is not there."""
    testsuite = find_testsuite(cache)
    if testsuite:
        return testsuite
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build may be fetching into the same cache
        testsuite = find_testsuite(cache)
        if testsuite:
            return testsuite
        for tool in ("apt-get", "dpkg-deb", "tar", "xz"):
            if not shutil.which(tool):
                fail("fetching %s needs %s (a Debian system with apt)" % (PACKAGE, tool))
        scratch = tempfile.mkdtemp(prefix=".fetch-", dir=cache)
        try:
            log("fetching %s into %s (apt-get download)" % (PACKAGE, cache))
            download = ["apt-get", "download", "-q", PACKAGE]
            result = subprocess.run(download, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if result.returncode != 0 and os.geteuid() == 0:
                log("apt-get download failed; updating the package lists (apt-get update) and trying again")
                run_checked(["apt-get", "update", "-q"], "apt-get update")
                result = subprocess.run(download, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
            if result.returncode != 0:
                fail("apt-get download %s failed (exit %d); run `apt-get update` first, or set MOTE_OMP_GCC_CACHE "
                     "to a directory holding gcc-*/libgomp/testsuite\n%s" % (PACKAGE, result.returncode,
                                                                              result.stdout[-4000:]))
            debs = glob.glob(os.path.join(scratch, PACKAGE + "_*.deb"))
            if len(debs) != 1:
                fail("apt-get download left %s in %s" % (debs or "no .deb", scratch))
            # The package holds GCC's source tarball; only libgomp's testsuite is taken out of it.
            data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", debs[0]], stdout=subprocess.PIPE)
            run_checked(["tar", "-x", "-C", scratch, "--wildcards", "./usr/src/gcc-12/gcc-*.tar.*"], "tar (the .deb)",
                        stdin=data.stdout)
            data.stdout.close()
            data.wait()
            tarballs = glob.glob(os.path.join(scratch, "usr", "src", "gcc-12", "gcc-*.tar.*"))
            if len(tarballs) != 1:
                fail("%s holds %s, not one gcc-*.tar.* in usr/src/gcc-12" % (debs[0], tarballs or "nothing"))
            unpack = os.path.join(scratch, "unpack")
            os.mkdir(unpack)
            run_checked(["tar", "-xaf", tarballs[0], "-C", unpack, "--wildcards", "gcc-*/libgomp/testsuite/*"],
                        "tar (GCC's source tarball)")
            tops = [d for d in os.listdir(unpack) if d.startswith("gcc-")]
            if len(tops) != 1 or not find_testsuite(unpack):
                fail("%s has no gcc-*/libgomp/testsuite with libgomp.c/c.exp and libgomp.c++/c++.exp" % tarballs[0])
            with open(os.path.join(unpack, tops[0], "SOURCE"), "w") as note:
                note.write("libgomp/testsuite of %s, from %s\n" % (os.path.basename(tarballs[0]),
                                                                   os.path.basename(debs[0])))
            target = os.path.join(cache, tops[0])
            if os.path.exists(target):
                shutil.rmtree(target)  # an incomplete earlier copy (find_testsuite did not take it)
            os.rename(os.path.join(unpack, tops[0]), target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    testsuite = find_testsuite(cache)
    if not testsuite:
        fail("no testsuite in %s after fetching" % cache)
    log("testsuite in %s" % testsuite)
    return testsuite


# ---- Tcl words: the arguments of dg- directives ---------------------------------------------

_BACKSLASH = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(text):
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_BACKSLASH.get(nxt, " " if nxt == "\n" else nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tcl_list(text):
    """The elements of a Tcl list (also the words of a command without $ and [] substitution):
    braces group verbatim, quotes group with backslash substitution."""
    words = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return words
        if text[i] == "{":
            depth, j = 1, i + 1
            while j < n and depth:
                if text[j] == "\\":
                    j += 2
                    continue
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if depth:
                raise ValueError("unbalanced braces in %r" % text)
            words.append(text[i + 1:j - 1])
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise ValueError("unterminated quote in %r" % text)
            words.append(_unescape(text[i + 1:j]))
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace():
                j += 2 if text[j] == "\\" else 1
            words.append(_unescape(text[i:j]))
            i = j


# dejagnu's dg-get-options: `{ dg-NAME ARGS }`, the arguments up to the last ` }` on the line.
_DIRECTIVE = re.compile(r"\{[ \t]+(dg-[-a-z]+)[ \t]+(.*)[ \t]+\}[^}]*$")


def directives(path):
    found = []
    with open(path, encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, 1):
            match = _DIRECTIVE.search(line.rstrip("\n"))
            if match:
                found.append((number, match.group(1), tcl_list(match.group(2))))
    return found


# ---- Effective targets and target selectors --------------------------------------------------


class Machine:
    """What GCC's effective-target checks would find on this machine, asked the way they ask:
    compile (and sometimes run) a small program of our own for each, once."""

    def __init__(self, cc, workdir):
        self.cc = cc
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        machine = subprocess.run([cc, "-dumpmachine"], stdout=subprocess.PIPE, text=True).stdout.strip()
        parts = machine.split("-")
        if len(parts) == 3:  # x86_64-linux-gnu: dejagnu's triplet (config.guess) has a vendor
            parts.insert(1, "pc" if re.match(r"(i.86|x86_64)$", parts[0]) else "unknown")
        self.triplet = "-".join(parts)
        self.values = {}
        self.unknown_words = set()
        self.lock = threading.RLock()

    def _program(self, name, text, flags=(), kind="exe", run=False):
        src = os.path.join(self.workdir, name + ".c")
        with open(src, "w") as out:
            out.write(text)
        out_file = os.path.join(self.workdir, name + {"exe": ".exe", "obj": ".o", "shared": ".so"}[kind])
        command = [self.cc, src, "-o", out_file] + list(flags)
        if kind == "obj":
            command.append("-c")
        elif kind == "shared":
            command += ["-shared", "-fpic"]
        built = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if not built or not run:
            return built
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        try:
            return subprocess.run([out_file], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=60).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def _offload_targets(self):
        verbose = subprocess.run([self.cc, "-v", "-fopenmp", "-foffload=disable"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True).stdout
        match = re.search(r"^OFFLOAD_TARGET_NAMES=(.*)$", verbose, re.M)
        return match.group(1).split(":") if match else []

    def _compute(self, name):
        x86 = fnmatch.fnmatchcase(self.triplet, "i?86-*-*") or fnmatch.fnmatchcase(self.triplet, "x86_64-*-*")
        main = "int main (void) { return 0; }\n"
        omp = ["-fopenmp", "-foffload=disable"]
        if name == "size32plus":
            return self._program(name, "char big[16777217L];\n", kind="obj")
        if name == "lp64":
            return self._program(name, "int t[sizeof (int) == 4 && sizeof (long) == 8 && sizeof (void *) == 8"
                                       " ? 1 : -1];\n", kind="obj")
        if name == "ia32":
            return self._program(name, "#ifndef __i386__\n#error not ia32\n#endif\nint x;\n", kind="obj")
        if name == "large_long_double":
            return self._program(name, "int t[sizeof (long double) > sizeof (double) ? 1 : -1];\n", kind="obj")
        if name == "__float128":
            return self._program(name, "__float128 q = 1;\n" + main)
        if name == "tls":
            return self._program(name, "__thread int v;\nint get (void) { return v; }\n", kind="obj")
        if name == "tls_runtime":
            return self._program(name, "__thread int v = 3;\nint main (void) { return v != 3; }\n", run=True)
        if name == "sync_int_long":
            return self._program(name, "int i; long l;\nint main (void) { __sync_fetch_and_add (&i, 1);"
                                       " __sync_val_compare_and_swap (&l, 0, 1); return __sync_lock_test_and_set"
                                       " (&i, 0) != 1; }\n", run=True)
        if name == "fpic":
            return self._program(name, "int f (void) { return 1; }\n", flags=["-fpic"], kind="obj")
        if name == "shared":
            return self._program(name, "int f (void) { return 1; }\n", kind="shared")
        if name == "alias":
            return self._program(name, "int f (void) { return 1; }\nint g (void) __attribute__ ((alias (\"f\")));\n"
                                       + main)
        if name == "lto":
            return self._program(name, main, flags=["-flto"])
        if name in ("sse2_runtime", "avx_runtime"):
            feature = name.split("_")[0]
            return x86 and self._program(name, "int main (void) { __builtin_cpu_init (); return"
                                               " !__builtin_cpu_supports (\"%s\"); }\n" % feature, run=True)
        if name == "avx512f":
            return x86 and self._program(name, "typedef float v16 __attribute__ ((vector_size (64)));\n"
                                               "v16 add (v16 a, v16 b) { return a + b; }\n",
                                         flags=["-mavx512f", "-O2"], kind="obj")
        if name == "vect_simd_clones":  # x86: when the assembler takes AVX-512F clones
            return x86 and self.value("avx512f")
        if name == "run_expensive_tests":
            return bool(os.environ.get("GCC_TEST_RUN_EXPENSIVE"))
        if name in ("offload_target_nvptx", "offload_target_amdgcn"):
            return any(t.startswith(name.split("_")[-1]) for t in self._offload_targets())
        # Devices: a target region reports whether it ran on the host, and whether a mapped
        # copy is the variable itself (shared address space), on GNU's libgomp.
        if name == "offload_device":
            return self._program(name, "#include <omp.h>\nint main (void) { int host = 1;\n#pragma omp target"
                                       " map(from: host)\nhost = omp_is_initial_device ();\nreturn host; }\n",
                                 flags=omp, run=True)
        if name in ("offload_device_shared_as", "offload_device_nonshared_as"):
            shared = name == "offload_device_shared_as"
            return self._program(name, "int main (void) { int v = 5;\n#pragma omp target map(to: v)\nv += 1;\n"
                                       "return %s; }\n" % ("v != 6" if shared else "v != 5"), flags=omp, run=True)
        if name in ("offload_device_nvptx", "offload_device_intel_mic", "offload_device_any_intel_mic"):
            return False  # devices of one architecture: none without offload_device
        return None

    def value(self, name):
        with self.lock:
            if name not in self.values:
                self.values[name] = None
                self.values[name] = self._compute(name)
            return self.values[name]

    def is_keyword(self, word, lang):
        return word in ("c", "c++") or self.value(word) is not None

    def keyword(self, word, lang):
        if word in ("c", "c++"):
            return word == lang
        return bool(self.value(word))

    def triplets(self, words):
        for word in words:
            if "-" not in word:
                self.unknown_words.add(word)
        return any(fnmatch.fnmatchcase(self.triplet, word) for word in words)

    # target-supports-dg.exp's dg-process-target-1, selector_opd, selector_expression.
    def selector(self, text, lang):
        """(what, selected) for a selector `target ...` or `xfail ...` (a Tcl list)."""
        words = tcl_list(text)
        if not words or words[0] not in ("target", "xfail"):
            raise ValueError("not a target selector: %r" % text)
        return words[0], self._rest(words[1:], lang)

    def _rest(self, rest, lang):
        if len(rest) == 1:
            inner = tcl_list(rest[0])
            if len(inner) == 1 and inner[0] == rest[0].strip():
                word = inner[0]
                return self.keyword(word, lang) if self.is_keyword(word, lang) else self.triplets([word])
            return self._expression(inner, lang)
        return self.triplets(rest)

    def _expression(self, exp, lang):
        if len(exp) >= 2 and exp[0] in ("any-opts", "no-opts"):
            raise ValueError("option selectors are not supported: %r" % exp)
        if len(exp) == 2 and exp[0] == "!":
            return not self._rest([exp[1]], lang)
        if len(exp) == 3 and exp[1] in ("&&", "||"):
            left = self._rest([exp[0]], lang)
            right = self._rest([exp[2]], lang)
            return (left and right) if exp[1] == "&&" else (left or right)
        return self._rest(exp, lang) if len(exp) == 1 else self.triplets(exp)


# ---- Selecting and reading the tests ---------------------------------------------------------


def quoted_includes(path, testsuite, seen=None):
    """The headers of GNU's build tree (INTERNAL_HEADERS) a source includes, itself or through the
    files beside it that it includes with "..." (others are the compiler's: cpuid.h)."""
    seen = set() if seen is None else seen
    missing = set()
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return missing
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        candidate = os.path.normpath(os.path.join(os.path.dirname(path), name))
        if os.path.basename(name) in INTERNAL_HEADERS:
            missing.add(name)
        elif os.path.isfile(candidate) and candidate not in seen:
            seen.add(candidate)
            missing |= quoted_includes(candidate, testsuite, seen)
    for name in re.findall(r"^\s*#\s*include\s+<([^>]+)>", text, re.M):
        if os.path.basename(name) in INTERNAL_HEADERS:
            missing.add(name)
    return missing


def gather(testsuite):
    found = []
    for lang, directory, suffix in SUITES:
        root = os.path.join(testsuite, directory)
        for dirpath, _, files in os.walk(root):
            for name in files:
                if name.endswith(suffix):  # dejagnu's find: case-sensitive glob (*.C is not *.cc)
                    path = os.path.join(dirpath, name)
                    found.append((lang, os.path.relpath(path, testsuite)))
    return sorted(found)


def read_test(machine, testsuite, lang, rel):
    """What GCC's harness would do with one file: a dict with "skip" (why it is not run) or how
    to build and run it."""
    test = {"id": "%s:%s" % (lang, rel), "lang": lang, "source": rel}
    path = os.path.join(testsuite, rel)
    action, selected, expect_fail = "run", True, False  # libgomp.exp: dg-do-what-default run
    flags = list(DEFAULT_FLAGS)
    env = {}
    sources = []
    shouldfail = False
    output = ""
    timeout = None
    skip = None
    try:
        found = directives(path)
    except ValueError as error:
        test["skip"] = "directive not understood: %s" % error
        return test

    def applies(args, index):
        return len(args) <= index or machine.selector(args[index], lang)[1]

    for line, name, args in found:
        try:
            if name == "dg-do":
                action, selected, expect_fail = args[0], True, False
                if len(args) >= 2:
                    what, match = machine.selector(args[1], lang)
                    if what == "target":
                        selected = match
                    else:
                        expect_fail = match
            elif not selected:
                continue  # target-supports-dg.exp: "don't bother if we're already skipping"
            elif name == "dg-require-effective-target":
                if applies(args, 1) and not machine.keyword(args[0], lang):
                    selected = False
                    skip = "needs effective target %s" % args[0]
            elif name == "dg-require-alias":
                if not machine.keyword("alias", lang):
                    selected, skip = False, "needs alias support"
            elif name == "dg-skip-if":
                # dg-skip-if COMMENT SELECTOR [INCLUDE-OPTS [EXCLUDE-OPTS]]; the options lists
                # are "*" and "" in every use here, or checked against the flags below.
                include = tcl_list(args[2]) if len(args) > 2 else ["*"]
                exclude = tcl_list(args[3]) if len(args) > 3 else []
                if machine.selector("target {%s}" % args[1], lang)[1] \
                        and (include == ["*"] or any(o in flags for o in include)) \
                        and not any(o in flags for o in exclude):
                    selected, skip = False, "dg-skip-if %s" % args[1].strip()
            elif name == "dg-options":
                if applies(args, 1):
                    flags = tcl_list(args[0])
            elif name == "dg-additional-options":
                if applies(args, 1):
                    flags += tcl_list(args[0])
            elif name == "dg-add-options":
                if args[0] != "__float128":  # nothing to add on x86 (target-supports.exp)
                    raise ValueError("dg-add-options %s is not known here" % args[0])
            elif name == "dg-additional-sources":
                sources += tcl_list(args[0])
            elif name == "dg-set-target-env-var":
                env[args[0]] = args[1]
            elif name == "dg-shouldfail":
                if applies(args, 1):
                    shouldfail = True
            elif name == "dg-output":
                if len(args) < 2 or machine.selector(args[1], lang)[0] == "xfail" \
                        or machine.selector(args[1], lang)[1]:
                    output += args[0]
            elif name == "dg-xfail-run-if":
                if machine.selector("target {%s}" % args[1], lang)[1]:
                    expect_fail = True
            elif name == "dg-timeout":
                if applies(args, 1):
                    timeout = int(args[0])
            elif name in ("dg-warning", "dg-error", "dg-message", "dg-bogus", "dg-excess-errors",
                          "dg-prune-output", "dg-final", "dg-xfail-if", "dg-ice"):
                pass  # about the compiler's messages and dumps, not the run
            else:
                raise ValueError("%s is not known here" % name)
        except (ValueError, IndexError) as error:
            test["skip"] = "line %d: %s: %s" % (line, name, error)
            return test
    if action != "run":
        test["skip"] = "dg-do %s (not a run test)" % action
        return test
    if not selected:
        test["skip"] = skip or "dg-do run for other targets"
        return test
    missing = quoted_includes(path, testsuite)
    for extra in sources:
        missing |= quoted_includes(os.path.join(os.path.dirname(path), extra), testsuite)
    if missing:
        test["skip"] = "includes %s (GNU's build tree, not the testsuite)" % ", ".join(sorted(missing))
        return test
    test.update(flags=flags, env=env, sources=[os.path.normpath(os.path.join(os.path.dirname(rel), s))
                                               for s in sources],
                shouldfail=shouldfail, output=output, timeout=timeout, expect_fail=expect_fail)
    return test


# ---- Building ---------------------------------------------------------------------------------


def test_dir(build_dir, test):
    return os.path.join(build_dir, test["lang"].replace("+", "x"), test["source"] + ".d")


def compile_command(cc, testsuite, test, exe):
    sources = [os.path.join(testsuite, s) for s in [test["source"]] + test["sources"]]
    # libgomp.exp's ALWAYS_CFLAGS; -foffload=disable: no device code, so that GNU's libgomp and
    # mote's both run every target region on the host.
    always = ["-fopenmp", "-foffload=disable", "-fmessage-length=0",
              "-fno-diagnostics-show-caret", "-fdiagnostics-color=never"]
    extra = ["-dumpbase", ""] if test["sources"] else []  # gcc-defs.exp, with dg-additional-sources
    return [cc] + sources + always + extra + test["flags"] + ["-lm", "-o", exe]


def build(args):
    build_dir = os.path.abspath(args.build_dir)
    testsuite = os.path.abspath(args.testsuite) if args.testsuite else fetch(cache_dir(args.cache))
    # Compiled programs are kept in the cache too (by what they are built from), so that a new
    # build directory (a fresh clone in CI) does not compile them again.
    binaries = None
    if os.environ.get("MOTE_OMP_GCC_KEEP_BINARIES", "1") != "0":
        binaries = os.path.join(cache_dir(args.cache), "programs")
        os.makedirs(binaries, exist_ok=True)
    os.makedirs(build_dir, exist_ok=True)
    start = time.monotonic()
    machine = Machine(args.cc, os.path.join(build_dir, "probes"))
    tests = [read_test(machine, testsuite, lang, rel) for lang, rel in gather(testsuite)]
    if machine.unknown_words:
        log("selector words read as target triplets (no check known for them): %s"
            % " ".join(sorted(machine.unknown_words)))
    compilers = {"c": args.cc, "c++": args.cxx}
    version = subprocess.run([args.cc, "--version"], stdout=subprocess.PIPE, text=True).stdout.splitlines()[0]
    selected = [t for t in tests if "skip" not in t]
    log("%d files, %d run tests selected (%s), %d not run; compiling with %d jobs"
        % (len(tests), len(selected), ", ".join("%s %d" % (lang, sum(t["lang"] == lang for t in selected))
                                                 for lang in ("c", "c++")),
           len(tests) - len(selected), args.jobs))

    def build_one(test):
        work = test_dir(build_dir, test)
        os.makedirs(work, exist_ok=True)
        exe = os.path.join(work, "test.exe")
        command = compile_command(compilers[test["lang"]], testsuite, test, exe)
        # What the program depends on: the command (without this build's paths), the compiler,
        # the sources.
        key = hashlib.sha256(json.dumps([command[1:-1], os.path.realpath(shutil.which(command[0]) or command[0]),
                                         version]).replace(build_dir, "<build>").encode())
        for source in [test["source"]] + test["sources"]:
            with open(os.path.join(testsuite, source), "rb") as data:
                key.update(data.read())
        key = key.hexdigest()
        stamp = os.path.join(work, "build.key")
        test.update(exe=exe, dir=work, command=command)
        if os.path.isfile(exe) and os.path.isfile(stamp) and open(stamp).read() == key:
            test["built"] = True
            return
        for old in (exe, stamp):
            if os.path.exists(old):
                os.unlink(old)
        kept = os.path.join(binaries, key + ".exe") if binaries else None
        if kept and os.path.isfile(kept):
            shutil.copy2(kept, exe)  # built before, by this or another build directory
            with open(stamp, "w") as out:
                out.write(key)
            test["built"] = "cached"
            return
        began = time.monotonic()
        try:
            result = subprocess.run(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace", timeout=COMPILE_TIMEOUT)
            ok, text = result.returncode == 0 and os.path.isfile(exe), result.stdout
        except subprocess.TimeoutExpired:
            ok, text = False, "compiler still running after %d s" % COMPILE_TIMEOUT
        test["compile_seconds"] = round(time.monotonic() - began, 2)
        with open(os.path.join(work, "build.log"), "w") as out:
            out.write(" ".join(command) + "\n" + text)
        test["built"] = ok
        if ok:
            with open(stamp, "w") as out:
                out.write(key)
            if binaries:
                scratch = "%s.%d.%d" % (kept, os.getpid(), threading.get_ident())
                shutil.copy2(exe, scratch)
                os.replace(scratch, kept)  # whole or not at all, for a build beside this one
        else:
            test["build_error"] = "\n".join(text.splitlines()[:12])

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(build_one, selected))
    broken = [t for t in selected if not t["built"]]
    manifest = {"testsuite": testsuite, "compiler": version, "triplet": machine.triplet,
                "effective_targets": {k: v for k, v in sorted(machine.values.items()) if v is not None},
                "tests": tests}
    with open(os.path.join(build_dir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=1)
    for test in broken:
        log("did not build: %s\n    %s" % (test["id"], test["build_error"].replace("\n", "\n    ")))
    if binaries:
        log("%d of %d programs taken from %s" % (sum(t.get("built") == "cached" for t in selected), len(selected),
                                                 binaries))
    log("built %d of %d in %.0f s (manifest: %s)" % (len(selected) - len(broken), len(selected),
                                                    time.monotonic() - start, os.path.join(build_dir, "manifest.json")))
    return 0


def load_manifest(build_dir):
    path = os.path.join(build_dir, "manifest.json")
    if not os.path.isfile(path):
        fail("%s is missing: run `%s build --build-dir %s` first" % (path, sys.argv[0], build_dir))
    with open(path) as data:
        return json.load(data)


# ---- Running ----------------------------------------------------------------------------------


def describe_status(code):
    if code < 0:
        try:
            return "killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "killed by signal %d" % -code
    return "exit %d" % code


def base_environment():
    # Only what the test sets: OpenMP settings of the caller's environment would change results.
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("OMP_") or k.startswith("GOMP_") or k == "LD_LIBRARY_PATH")}
    env.update(LC_ALL="C", LANG="C")  # libgomp.exp
    return env


# GNU's runs spin at most this long before they sleep, unless the test sets how they wait. GNU's
# default (300000 spins) makes a waiting thread spin through its whole time slice when the
# runner's two jobs share two cores: for-11.c then takes 20 s instead of under 1 s. How long a
# thread spins is no part of what a program computes.
GNU_SPINCOUNT = "10000"


def test_settings(test, threads, gnu):
    settings = dict(test["env"])
    settings.setdefault("OMP_NUM_THREADS", str(threads))
    if gnu and "GOMP_SPINCOUNT" not in settings and "OMP_WAIT_POLICY" not in settings:
        settings["GOMP_SPINCOUNT"] = GNU_SPINCOUNT
    return settings


def run_environment(test, threads, mote_dir):
    env = base_environment()
    env.update(test_settings(test, threads, gnu=not mote_dir))
    if mote_dir:
        env["LD_LIBRARY_PATH"] = mote_dir
    return env


def run_once(test, threads, mote_dir, timeout):
    env = run_environment(test, threads, mote_dir)
    began = time.monotonic()
    process = subprocess.Popen([test["exe"]], cwd=test["dir"], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    hung = False
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(process.pid, signal.SIGKILL)  # its own process group (start_new_session)
        out, _ = process.communicate()
    seconds = time.monotonic() - began
    text = out[:OUTPUT_KEEP].decode("utf-8", "replace")
    code = process.returncode
    if hung:
        ok, why = False, "hang: no exit within %d s" % timeout
    elif test["shouldfail"] and code == 0:
        ok, why = False, "exit 0, but the test must fail (dg-shouldfail)"
    elif not test["shouldfail"] and code != 0:
        ok, why = False, describe_status(code)
    else:
        ok, why = True, describe_status(code)
    # dejagnu reads the output through a terminal, whose lines end in \r\n; the patterns of
    # dg-output are Tcl regexps (`.` matches a newline too), searched anywhere in it.
    if ok and test["output"] and not re.search(test["output"], text.replace("\n", "\r\n"), re.S):
        ok, why = False, "%s, but the output does not match dg-output /%s/" % (why, test["output"].encode(
            "unicode_escape").decode())
    return {"ok": ok, "why": why, "hung": hung, "seconds": round(seconds, 3), "output": text}


def by_hand(test, threads, mote_dir):
    env = test_settings(test, threads, gnu=not mote_dir)
    settings = " ".join("%s=%s" % (k, shlex_quote(v)) for k, v in sorted(env.items()))
    return "cd %s && env -u LD_LIBRARY_PATH LC_ALL=C %s%s ./test.exe" % (
        shlex_quote(test["dir"]), settings, " LD_LIBRARY_PATH=" + shlex_quote(mote_dir) if mote_dir else "")


def shlex_quote(text):
    return shlex.quote(text)


def first_lines(text, count=8):
    lines = text.splitlines()
    shown = lines[:count]
    if len(lines) > count:
        shown.append("... (%d lines more)" % (len(lines) - count))
    return shown


def run(args):
    build_dir = os.path.abspath(args.build_dir)
    manifest = load_manifest(build_dir)
    mote_dir = os.path.abspath(args.mote_dir)
    library = os.path.join(mote_dir, "libgomp.so.1")
    if not os.path.isfile(library):
        fail("%s is missing: build mote's libgomp.so.1 (target mote_gomp) first" % library)
    tests = [t for t in manifest["tests"] if "skip" not in t and t.get("built")]
    if args.only:
        tests = [t for t in tests if any(fnmatch.fnmatchcase(t["id"], p) or fnmatch.fnmatchcase(t["source"], p)
                                         for p in args.only)]
        if not tests:
            fail("no built test matches %s" % " ".join(args.only))
    if not tests:
        fail("no tests were built")
    # The run must load mote's library, not GNU's: the binaries have no RUNPATH to prefer GNU's.
    env = dict(os.environ, LD_LIBRARY_PATH=mote_dir)
    ldd = subprocess.run(["ldd", tests[0]["exe"]], env=env, stdout=subprocess.PIPE, text=True).stdout
    if library not in ldd and os.path.realpath(library) not in ldd:
        fail("with LD_LIBRARY_PATH=%s, %s does not load %s:\n%s" % (mote_dir, tests[0]["exe"], library, ldd))
    timeout = args.timeout
    threads = args.threads
    log("%d tests at OMP_NUM_THREADS=%d (unless a test sets it), each on GNU's libgomp and on mote's (%s); "
        "%d jobs, %d s before a run counts as a hang" % (len(tests), threads, mote_dir, args.jobs, timeout))
    start = time.monotonic()
    done = [0]
    done_lock = threading.Lock()

    def run_test(test):
        limit = max(timeout, test["timeout"] or 0)
        result = {"id": test["id"]}
        for kind, lib in (("gnu", None), ("mote", mote_dir)):
            attempts = [run_once(test, threads, lib, limit)]
            # A failure once more (does it always fail, or now and then?); a hang is not waited
            # for twice.
            if not attempts[0]["ok"] and not attempts[0]["hung"]:
                attempts.append(run_once(test, threads, lib, limit))
            result[kind] = attempts
        with done_lock:
            done[0] += 1
            if done[0] % 100 == 0:
                log("%d of %d done (%.0f s)" % (done[0], len(tests), time.monotonic() - start))
        return result

    # The slowest first (their times from the last run), so that the end is not one long test.
    durations_path = os.path.join(build_dir, "durations-t%d.json" % threads)
    durations = {}
    if os.path.isfile(durations_path):
        with open(durations_path) as data:
            durations = json.load(data)
    order = sorted(tests, key=lambda t: -durations.get(t["id"], 0.0))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip([t["id"] for t in order], pool.map(run_test, order)))
    elapsed = time.monotonic() - start
    with open(durations_path, "w") as out:
        json.dump({i: r["gnu"][0]["seconds"] + r["mote"][0]["seconds"] for i, r in results.items()}, out)

    def passed(attempts):
        return any(a["ok"] for a in attempts)

    rows = []
    regressions = []
    for test in tests:
        result = results[test["id"]]
        gnu, mote = passed(result["gnu"]), passed(result["mote"])
        # GNU's library passes if one of its (at most two) runs passes; mote's must pass the first.
        mote_first = result["mote"][0]["ok"]
        rows.append({"id": test["id"], "gnu": gnu, "mote": mote_first,
                     "gnu_why": result["gnu"][-1]["why"], "mote_runs": [a["why"] for a in result["mote"]],
                     "seconds": {"gnu": result["gnu"][0]["seconds"], "mote": result["mote"][0]["seconds"]}})
        if gnu and not mote_first:
            runs = result["mote"]
            regressions.append({
                "id": test["id"], "threads": threads,
                "why": runs[0]["why"],
                "again": ("not run again" if len(runs) == 1 else "failed again: " + runs[1]["why"] if not mote
                          else "passed when run again: intermittent"),
                "output": first_lines(runs[0]["output"]),
                "command": by_hand(test, threads, mote_dir),
                "gnu_command": by_hand(test, threads, None),
            })
    gnu_passed = sum(r["gnu"] for r in rows)
    mote_passed = sum(r["mote"] for r in rows)
    both_fail = [r for r in rows if not r["gnu"]]
    summary = {"threads": threads, "selected": len(rows), "gnu_passed": gnu_passed, "mote_passed": mote_passed,
               "regressions": len(regressions), "seconds": round(elapsed, 1),
               "mote_passes_gnu_fails": [r["id"] for r in rows if r["mote"] and not r["gnu"]]}
    lines = ["GCC 12 libgomp run tests, OMP_NUM_THREADS=%d: %d tests, GNU's libgomp passed %d, mote's passed %d "
             "(%.0f s)" % (threads, len(rows), gnu_passed, mote_passed, elapsed)]
    for lang in ("c", "c++"):
        mine = [r for r in rows if r["id"].startswith(lang + ":")]
        lines.append("  %-4s %4d tests  GNU %4d  mote %4d" % (lang, len(mine), sum(r["gnu"] for r in mine),
                                                             sum(r["mote"] for r in mine)))
    if both_fail:
        lines.append("Failing on GNU's libgomp (not compared):")
        lines += ["  %s: %s" % (r["id"], r["gnu_why"]) for r in both_fail]
    if regressions:
        lines.append("FAIL: %d tests pass on GNU's libgomp and fail on mote's:" % len(regressions))
        for reg in regressions:
            lines.append("  %s: %s (%s)" % (reg["id"], reg["why"], reg["again"]))
            lines += ["      | " + line for line in reg["output"]]
            lines.append("      by hand: " + reg["command"])
    else:
        lines.append("PASS: every test that passes on GNU's libgomp passes on mote's")
    text = "\n".join(lines)
    print(text, flush=True)
    name = "results-t%d" % threads
    with open(os.path.join(build_dir, name + ".txt"), "w") as out:
        out.write(text + "\n")
    with open(os.path.join(build_dir, name + ".json"), "w") as out:
        json.dump({"summary": summary, "regressions": regressions, "tests": rows}, out, indent=1)
    log("results: %s.{txt,json}" % os.path.join(build_dir, name))
    return 1 if regressions else 0


def list_tests(args):
    manifest = load_manifest(os.path.abspath(args.build_dir))
    reasons = {}
    for test in manifest["tests"]:
        if "skip" in test:
            print("skip  %-60s %s" % (test["id"], test["skip"]))
            key = re.sub(r"^line \d+: ", "", test["skip"])
            reasons[key] = reasons.get(key, 0) + 1
        else:
            print("%-5s %-60s %s" % ("run" if test.get("built") else "BROKEN", test["id"],
                                     " ".join(test.get("command", [])[1:2] + test["flags"])))
    print("\neffective targets:", " ".join("%s=%d" % kv for kv in manifest["effective_targets"].items()))
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print("%5d  %s" % (count, reason))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="where the testsuite is kept (default: MOTE_OMP_GCC_CACHE, else "
                                        "${XDG_CACHE_HOME:-~/.cache}/mote/gcc-12-testsuite)")
    jobs = int(os.environ.get("MOTE_OMP_GCC_JOBS", "2"))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch")
    b = sub.add_parser("build")
    b.add_argument("--build-dir", required=True)
    b.add_argument("--cc", default="gcc")
    b.add_argument("--cxx", default="g++")
    b.add_argument("--jobs", type=int, default=jobs)
    b.add_argument("--testsuite", help="a libgomp/testsuite directory to use instead of the cache's")
    r = sub.add_parser("run")
    r.add_argument("--build-dir", required=True)
    r.add_argument("--threads", type=int, required=True)
    r.add_argument("--mote-dir", required=True, help="the directory of mote's libgomp.so.1")
    r.add_argument("--jobs", type=int, default=jobs)
    r.add_argument("--timeout", type=int, default=int(os.environ.get("MOTE_OMP_GCC_TIMEOUT", DEFAULT_TIMEOUT)))
    r.add_argument("--only", nargs="+", help="only these tests (globs on the id, c:libgomp.c/foo.c, or the path)")
    ls = sub.add_parser("list")
    ls.add_argument("--build-dir", required=True)
    args = parser.parse_args()
    if args.command == "fetch":
        print(fetch(cache_dir(args.cache)))
        return 0
    if args.command == "build":
        return build(args)
    if args.command == "run":
        return run(args)
    return list_tests(args)


if __name__ == "__main__":
    sys.exit(main())
