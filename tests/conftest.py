"""Shared fixtures: small MCMC settings that keep CI fast but keep R-hat meaningful."""

from __future__ import annotations

import pytest

from dpsynth.mechanisms import Sampler


@pytest.fixture(scope="session")
def small_sampler() -> Sampler:
    """4 chains x 300 warmup x 300 draws: enough for max-R-hat < 1.05 on the test models."""
    return Sampler(chains=4, iter_warmup=300, iter_sampling=300)
