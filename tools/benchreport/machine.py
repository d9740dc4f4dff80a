"""What the report says about the machine: CPU, kernel, compilers, package
versions, commit, load.

    info = machine_info()    # a dict, stored in results.json as "machine"
"""

import datetime
import os
import platform
import subprocess

import matplotlib

from .paths import ROOT


def sh(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def dpkg_version(pkg):
    return sh(["dpkg-query", "-W", "-f=${Version}", pkg]) or None


def machine_info():
    model = ""
    for line in sh(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    first = lambda s: s.splitlines()[0] if s else None  # noqa: E731
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": model,
        "nproc": int(sh(["nproc"]) or 0),
        "kernel": sh(["uname", "-srvmo"]),
        "gxx": first(sh(["g++", "--version"])),
        "clangxx": first(sh(["clang++", "--version"])),
        "python": platform.python_version(),
        "matplotlib": matplotlib.__version__,
        "packages": {p: dpkg_version(p) for p in
                     ["libtbb-dev", "libtbb12", "libomp-dev", "libomp5-14", "libgomp1", "libhwloc-dev"]},
        "mote_commit": sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]) or None,
        "loadavg_start": load,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
