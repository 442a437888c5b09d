"""The README's examples, as written, against the lab: the producer's
block writes 1000 records, the consumer's block (in a child process,
stopped with Ctrl-C) prints them all."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import lab

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks():
    text = README.read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_producer_then_consumer(servers):
    consumer_code, producer_code = blocks()[:2]
    assert "Consumer(conf)" in consumer_code and "Producer(" in producer_code
    client = lab.boto3_client("kinesis", servers["kinesalite"])
    client.create_stream(StreamName="orders", ShardCount=2)
    client.get_waiter("stream_exists").wait(
        StreamName="orders", WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})

    exec(compile(producer_code, "README producer", "exec"), {})

    p = subprocess.Popen([sys.executable, "-c", consumer_code],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=os.environ.copy())
    lines = []
    end = time.monotonic() + 90
    while len(lines) < 1000 and time.monotonic() < end:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert len(lines) == 1000, err[-2000:]
    assert "KeyboardInterrupt" in err  # Ctrl-C ended the loop, close() ran
    payloads = sorted(l.split(" ", 2)[2].strip() for l in lines)
    assert payloads == sorted("b'order %d'" % i for i in range(1000))
