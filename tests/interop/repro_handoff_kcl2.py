#!/usr/bin/env python3
"""Reproduces a known difference, not run by `make interop` (its name does
not start with test_): kncat's default hand-off asks a KCL 2.x worker for
a lease.

kncat takes a lease from a live worker by asking for it (the KCL 3.x's
`checkpointOwner`: `leaseOwner` becomes the taker, `checkpointOwner` the
owner still finishing) and waits up to lease.handoff.timeout.ms (30 s) for
the owner to checkpoint and pass it on.  A KCL 2.x owner knows nothing of
it: its next renewal fails, it stops reading the shard, its checkpoints
are refused ("instance doesn't hold the lease"), and it never passes the
lease on.  The shard is then read by nobody until the hand-off times out.

Expected (what this asserts): the shard kncat takes from the live KCL 2.x
worker is read again within a lease duration and a renewal interval of the
KCL's last record of it.  Today it fails: the gap is about 30 s.

    python3 -m pytest -q tests/interop/repro_handoff_kcl2.py
"""

from __future__ import annotations

import os
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_mixed_fleet import KN3_PROPS, LEASE_MS, MixedFleetBase, SERVERS  # noqa: E402,F401
from groupkit import Producer, run_kncat, spread_keys, unique, wait_for  # noqa: E402

KNCAT = os.environ.get("KNCAT", str(Path(__file__).resolve().parents[2] / "build" / "kncat"))


def setUpModule():
    SERVERS.start("dynalite")


def tearDownModule():
    SERVERS.stop()


class HandoffToKcl2(MixedFleetBase, unittest.TestCase):
    server_name = "kinesalite"

    def test_lease_taken_from_live_kcl2_is_read_within_a_lease_duration(self):
        self.stream, self.app = unique("ho", "s"), unique("ho", "app")
        run_kncat(KNCAT, self.env, "create", self.stream, "--shards", 4)
        prod = Producer(self.boto, self.stream, spread_keys(8, "k"), interval=0.2)
        prod.start()
        try:
            t = self.now()
            k1 = self.kcl("kcl-1")
            self.wait_owned("the KCL holding every shard", "kcl-", t)
            kn1 = self.kn("kn-1", props=KN3_PROPS)      # the default hand-off
            wait_for("kn-1 delivering", lambda: kn1.count() > 0, 120)
        finally:
            prod.finish()
        t_first, rec = kn1.records()[0]
        shard = rec["shard"]
        t_last = max(t for t, r in k1.records() if r["shard"] == shard)
        gap = t_first - t_last
        print(f"\n  {shard}: last read by the KCL, first by kncat {gap:.1f} s later",
              file=sys.stderr)
        self.assertLess(gap, (LEASE_MS + KN3_PROPS["lease.renew.interval.ms"]) / 1000)
        self.failed = False


if __name__ == "__main__":
    unittest.main()
