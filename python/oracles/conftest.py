"""pytest setup for the oracle job: one seed for the whole session (TESSERA_ORACLE_SEED,
printed in the header), and the case budget (TESSERA_ORACLE_CASES random cases per op
and dtype)."""

import os
import random

import pytest

import harness

SEED = int(os.environ.get("TESSERA_ORACLE_SEED") or random.SystemRandom().randrange(2**31))
CASES = int(os.environ.get("TESSERA_ORACLE_CASES", "6"))


def pytest_report_header(config):
    torch = "PyTorch" if harness.HAVE_TORCH else "NumPy only (PyTorch not installed)"
    return [
        f"tessera oracles: seed {SEED} (TESSERA_ORACLE_SEED={SEED} reruns it), "
        f"{CASES} random cases per op and dtype, backend {harness.BACKEND}, oracle {torch}",
        f"binary: {harness.BINARY}",
    ]


@pytest.fixture
def rng(request):
    """A generator seeded from the session seed and the test's id, so one test reruns alone
    with the same data."""
    import zlib

    import numpy as np

    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])
