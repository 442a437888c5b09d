#!/usr/bin/env python3
"""Reproduces a known difference, not run by `make interop` (its name does
not start with test_): kncat's default hand-off asks a KCL 2.x worker for
a lease.

kncat takes a lease from a live worker by asking for it (the KCL 3.x's
`checkpointOwner`: `leaseOwner` becomes the taker, `checkpointOwner` the
owner still finishing) and waits up to lease.handoff.timeout.ms (30 s) for
the owner to checkpoint and pass it on.  A KCL 2.x owner knows nothing of
it: its renewals (conditional on leaseCounter only) go on succeeding, it
goes on reading the shard, its checkpoints may be refused ("Can't
update checkpoint - instance doesn't hold the lease for this shard"), and
it never passes the lease on.  After 30 s kncat takes the lease ("did
not hand it over (hand-off too long): taking it") and reads from the last
checkpoint the table holds; meanwhile the KCL read the shard without
recording any progress.

Expected (what this asserts): kncat never waits out a hand-off with a KCL
2.x owner (it should take such a lease the ordinary way, at once, as
`lease.handoff.timeout.ms=0` does).  Today it fails.

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
        shard = kn1.records()[0][1]["shard"]
        refused = k1.stderr().count("Can't update checkpoint - instance doesn't hold the lease")
        waited = "hand-off too long" in kn1.stderr()
        print(f"\n  {shard}: KCL checkpoints refused {refused}, kncat waited out "
              f"the hand-off: {waited}", file=sys.stderr)
        self.assertFalse(waited, "kncat waited lease.handoff.timeout.ms for a KCL 2.x "
                         "owner that cannot hand over")
        self.failed = False


if __name__ == "__main__":
    unittest.main()
