"""tests/launch: the `token` fixture marks a test's processes and fails the test when any of
them outlives it (see launch_helpers)."""
from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from launch_helpers import processes_with


@pytest.fixture
def token():
    """A unique token for this test's processes; after the test none may be left."""
    value = uuid.uuid4().hex
    yield value
    deadline = time.monotonic() + 5  # the process manager may still be reaping
    while processes_with(value) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with(value)
    for line in left:  # ours (they carry this test's token): clean up before failing
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes left behind:\n" + "\n".join(left)
