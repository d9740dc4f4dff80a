"""Where the report finds the registry, the executables and its output
directory, relative to the repository.

    from .paths import ROOT, DEFAULT_REGISTRY
"""

import os

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TOOLS)
DEFAULT_REGISTRY = os.path.join(ROOT, "bench", "suites.json")
DEFAULT_BIN_DIRS = [
    os.path.join(ROOT, "build", "bench", "bench", "bin"),   # in-tree build (g++)
    os.path.join(ROOT, "build", "bench-llvmomp", "bin"),    # LLVM OpenMP build (clang++)
]
DEFAULT_OUT = os.path.join(ROOT, "bench", "results")
