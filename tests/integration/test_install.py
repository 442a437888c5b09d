#!/usr/bin/env python3
"""The installed library is usable where it is installed: `cmake --install
BUILD --prefix DIR` into a fresh directory, then pkg-config (kn.pc found
there) gives flags naming DIR, a program built with them links and runs
against the installed library, and that library holds no test hooks.

Environment: KN_BUILD_DIR (the build), KN_SOURCE_DIR.  Needs cmake,
pkg-config and a C compiler (CC, else cc).  Prints "N passed, M failed".
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("KN_BUILD_DIR", SOURCE_DIR / "build"))

# Functions only the unit tests call.
HOOKS = {"kn_creds_provider_advance", "kn_creds_provider_freeze_clock",
         "kn_creds_provider_fetches"}

PROGRAM = r"""
#include <stdio.h>
#include <kn/kn.h>
int main(void) {
  kn_conf_t *c = kn_conf_new();
  printf("%s\n", c ? "ok" : "no conf");
  kn_conf_destroy(c);
  return 0;
}
"""


class Install(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="kn-install-"))
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_pkg_config_is_relocatable(self):
        prefix = self.dir / "root"
        p = subprocess.run(["cmake", "--install", str(BUILD_DIR), "--prefix", str(prefix)],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        pcs = glob.glob(str(prefix / "**" / "pkgconfig" / "kn.pc"), recursive=True)
        self.assertEqual(len(pcs), 1, pcs)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
        flags = {}
        for what in ("--cflags", "--libs"):
            p = subprocess.run(["pkg-config", what, "kn"], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            flags[what] = shlex.split(p.stdout)
        incs = [f[2:] for f in flags["--cflags"] if f.startswith("-I")]
        libs = [f[2:] for f in flags["--libs"] if f.startswith("-L")]
        # (its dependencies' own flags may come too)
        self.assertIn(str(prefix / "include"), [os.path.realpath(d) for d in incs])
        self.assertFalse([d for d in incs + libs if d.startswith("/usr/local")], flags)
        mine = [os.path.realpath(d) for d in libs
                if os.path.realpath(d).startswith(str(prefix) + os.sep)]
        self.assertEqual(len(mine), 1, libs)
        libdir = mine[0]
        self.assertTrue(libdir.startswith(str(prefix) + os.sep), libdir)
        self.assertTrue(glob.glob(os.path.join(libdir, "libkinesis.*")), libdir)
        # The library installed holds no test hooks (tests link their own).
        for lib in glob.glob(os.path.join(libdir, "libkinesis.*")):
            p = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            hooks = sorted({line.split()[-1] for line in p.stdout.splitlines()
                            if line.split() and line.split()[-1] in HOOKS})
            self.assertEqual(hooks, [], lib)
        # A program built with those flags runs against the installed copy.
        src = self.dir / "prog.c"
        src.write_text(PROGRAM)
        exe = self.dir / "prog"
        cc = shlex.split(os.environ.get("CC", "cc"))
        p = subprocess.run(cc + flags["--cflags"] + [str(src), "-o", str(exe)] + flags["--libs"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([str(exe)], env=dict(os.environ, LD_LIBRARY_PATH=libdir),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, "ok\n"), p.stderr)


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=2).result
    bad = len(res.failures) + len(res.errors)
    print(f"{res.testsRun - bad} passed, {bad} failed")
    sys.exit(1 if bad else 0)
