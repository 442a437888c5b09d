#!/usr/bin/env python3
"""The sanitizer scan of runkit.py, on reports as clang's AddressSanitizer,
LeakSanitizer and UndefinedBehaviorSanitizer print them, and on clean
output; run() and kncat() on real child processes.  No servers; under a
second (ctest label unit)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

ASAN = """\
=================================================================
==17382==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000015 at pc 0x55ea617d9109
WRITE of size 1 at 0x602000000015 thread T0
    #0 0x55ea617d9108 in main /tmp/a.c:5:61
SUMMARY: AddressSanitizer: heap-buffer-overflow /tmp/a.c:5:61 in main
"""

LSAN = """\

=================================================================
==17398==ERROR: LeakSanitizer: detected memory leaks

Direct leak of 7 byte(s) in 1 object(s) allocated from:
    #0 0x55a1501bd14e in __interceptor_malloc (/tmp/a+0xa414e)
    #1 0x55a1501f82a8 in main /tmp/a.c:6:38

SUMMARY: AddressSanitizer: 7 byte(s) leaked in 1 allocation(s).
"""

# Without UBSAN_OPTIONS=print_summary the line is all there is.
UBSAN = "src/core/seqnum.c:7:48: runtime error: signed integer overflow: " \
        "2147483646 + 2 cannot be represented in type 'int'\n"

# What kncat prints when all is well, or fails without a sanitizer finding:
# the scan must not mistake any of it for a report.
CLEAN = """\
kncat: consuming stream s1 (2 shards) from trim_horizon
%4|kinesis|RETRY| ProvisionedThroughputExceededException: Rate exceeded for shard
ERROR: stream s2 not found (ResourceNotFoundException)
kncat: error: unknown option --sanitize
SUMMARY {"records": 12, "bytes": 480, "errors": 0}
"""


def lines_of(text):
    return [line for line in text.splitlines() if line.strip()]


def python(code, **kwargs):
    """A child process running code (prints on stderr with sys.stderr)."""
    return runkit.run([sys.executable, "-c", code], **kwargs)


class Scan(unittest.TestCase):
    def flags(self, report):
        # alone, amid clean output, and as bytes
        for text in (report, CLEAN + report + CLEAN, (CLEAN + report).encode()):
            found = runkit.sanitizer_report(text)
            self.assertTrue(found, text)
            for line in lines_of(found):
                self.assertIn(line, report)
            with self.assertRaises(AssertionError) as ctx:
                runkit.check_clean(text, "kncat consume")
            self.assertIn("kncat consume: sanitizer report", str(ctx.exception))

    def test_address_sanitizer(self):
        self.flags(ASAN)
        self.assertIn("ERROR: AddressSanitizer: heap-buffer-overflow",
                      runkit.sanitizer_report(ASAN))

    def test_leak_sanitizer(self):
        self.flags(LSAN)
        self.assertIn("ERROR: LeakSanitizer: detected memory leaks",
                      runkit.sanitizer_report(LSAN))

    def test_ubsan_runtime_error(self):
        self.flags(UBSAN)
        self.assertEqual(runkit.sanitizer_report(UBSAN), UBSAN.strip())

    def test_clean_output_passes(self):
        for text in (CLEAN, CLEAN.encode(), "", b""):
            self.assertEqual(runkit.sanitizer_report(text), "")
            runkit.check_clean(text, "kncat")

    def test_tail_of_the_output_in_the_message(self):
        with self.assertRaises(AssertionError) as ctx:
            runkit.check_clean("x" * 10000 + UBSAN, tail=200)
        message = str(ctx.exception)
        self.assertIn("runtime error: signed integer overflow", message)
        self.assertLess(len(message), 300)


class Run(unittest.TestCase):
    def test_clean_child(self):
        p = python("import sys; print('out'); sys.stderr.write('note\\n'); sys.exit(3)")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (3, "out\n", "note\n"))

    def test_child_with_report(self):
        for report in (ASAN, LSAN, UBSAN):
            with self.assertRaises(AssertionError) as ctx:
                python("import sys; sys.stderr.write(%r)" % report, what="the child")
            self.assertIn("the child: sanitizer report", str(ctx.exception))

    def test_bytes_and_input(self):
        p = python("import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()[::-1])",
                   input=b"\x00\xffab", text=False)
        self.assertEqual(p.stdout, b"ba\xff\x00")

    def test_kncat_runs_the_binary_given(self):
        p = runkit.kncat("-c", "print('kncat')", kncat=sys.executable)
        self.assertEqual(p.stdout, "kncat\n")
        with self.assertRaises(AssertionError):
            runkit.kncat("-c", "import sys; sys.stderr.write(%r)" % LSAN, kncat=sys.executable)

    def test_paths(self):
        self.assertTrue(runkit.KNCAT)
        self.assertEqual(os.path.basename(runkit.tool("svc_tool", "KN_NO_SUCH_VARIABLE")),
                         "svc_tool")


if __name__ == "__main__":
    unittest.main()
