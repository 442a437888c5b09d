#!/usr/bin/env python3
"""A do-nothing amazon-kclpy (v3) record processor for bench_python.py,
run by `kncat multilang` (one process per shard): a function called per
record, no checkpoint but at shard end and shutdown (ML_CHECKPOINT=batch:
also after every batch, as bench/ml_null.js does, for bench_peers.py); it
writes its running record count to ML_OUT/count-PID."""

import os

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

COUNT = os.path.join(os.environ["ML_OUT"], "count-%d" % os.getpid())
EVERY_BATCH = os.environ.get("ML_CHECKPOINT") == "batch"


def handle(record):
    """The do-nothing handler."""


class Null(processor.RecordProcessorBase):
    def __init__(self):
        self.n = 0

    def initialize(self, initialize_input):
        pass

    def process_records(self, process_records_input):
        for r in process_records_input.records:
            handle(r)
        self.n += len(process_records_input.records)
        with open(COUNT, "w") as f:
            f.write(str(self.n))
        if EVERY_BATCH and process_records_input.records:
            last = process_records_input.records[-1]
            process_records_input.checkpointer.checkpoint(last.sequence_number)

    def lease_lost(self, lease_lost_input):
        pass

    def shard_ended(self, shard_ended_input):
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input):
        shutdown_requested_input.checkpointer.checkpoint()


if __name__ == "__main__":
    kcl.KCLProcess(Null()).run()
