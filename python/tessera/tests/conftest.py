"""Shared fixtures: a fresh random generator per test (its seed printed on failure)."""

import os

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("TESSERA_PY_SEED", np.random.SeedSequence().entropy % 2**32))
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed} (TESSERA_PY_SEED={seed} reruns it)")
    return np.random.default_rng(seed)
