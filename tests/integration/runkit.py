"""Running the project's programs from the Python tests: kncat and the
tools of tests/tools, with their stderr scanned for sanitizer reports.

A sanitizer build (make asan's build-asan, or any build configured with
-DKN_SANITIZE=ON) prints its findings on stderr and may still exit 0, so
every test that runs one of our programs must look at what it printed:

    import runkit
    p = runkit.kncat("list", env=env)             # CompletedProcess, text
    p = runkit.run([runkit.tool("svc_tool"), ...], env=env, text=False)
    runkit.check_clean(stderr_text, "worker 2")   # output collected by hand

run() and kncat() raise AssertionError when stderr holds a report; they
leave the exit status to the caller.  sanitizer_report() returns the
reporting lines of a text ("" when clean).

Environment: KNCAT (the kncat binary), KN_BUILD_DIR (default build/ in
the source tree), KN_SOURCE_DIR; a tool's own variable (SVC_TOOL, ...)
overrides its path."""

import os
import re
import subprocess

SRC = os.environ.get("KN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("KN_BUILD_DIR") or os.path.join(SRC, "build")
KNCAT = os.environ.get("KNCAT") or os.path.join(BUILD, "kncat")

# AddressSanitizer, LeakSanitizer ("==PID==ERROR: LeakSanitizer: detected
# memory leaks"), ThreadSanitizer and the others name themselves;
# UndefinedBehaviorSanitizer's findings are "FILE:LINE:COL: runtime error:
# ..." lines, with a SUMMARY line only when it is asked for.
_REPORT = re.compile(r"[A-Za-z]+Sanitizer\b|\bruntime error: ")


def tool(name, env_var=None):
    """The path of tests/tools/NAME in the build, or $ENV_VAR if set
    (default NAME upper-cased: svc_tool -> SVC_TOOL)."""
    return os.environ.get(env_var or name.upper()) or os.path.join(
        BUILD, "tests", "tools", name)


def sanitizer_report(text):
    """The lines of text that are part of a sanitizer report, joined; ""
    when there are none.  text may be bytes."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(line for line in text.splitlines() if _REPORT.search(line))


def check_clean(text, what="", tail=4000):
    """Raises AssertionError, with the last tail characters of text, when
    text holds a sanitizer report."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    if sanitizer_report(text):
        raise AssertionError("%ssanitizer report:\n%s" % (
            what + ": " if what else "", text[-tail:]))


def run(cmd, *, what=None, text=True, tail=4000, **kwargs):
    """subprocess.run(cmd) with stdout and stderr captured (str unless
    text=False); raises AssertionError if stderr holds a sanitizer report.
    The exit status is the caller's to check."""
    cmd = [str(a) for a in cmd]
    p = subprocess.run(cmd, capture_output=True, text=text, **kwargs)
    check_clean(p.stderr, what or " ".join(cmd[:6]), tail)
    return p


def kncat(*args, **kwargs):
    """run([KNCAT, *args], **kwargs); kncat= picks another binary."""
    return run([kwargs.pop("kncat", None) or KNCAT, *args], **kwargs)
