"""The one source of fresh randomness for a private release: the operating system's entropy.

Every unseeded random choice a release makes on the confidential data (Stan's seed, a
column's subsample, its conditional draws) starts here, and nothing drawn here is
published. The test suite replaces :func:`os_seed` by a fixed sequence per test, so that its
statistical tests run with fixed seeds while taking the unseeded (labelled) path.
"""

from __future__ import annotations

import secrets

import numpy as np

__all__ = ["os_seed", "stream"]


def os_seed() -> int:
    """A fresh seed from the operating system's entropy (never published)."""
    return secrets.randbits(63)


def stream(seed: int | None, index: int) -> np.random.Generator:
    """Generator ``index`` of a release: from the user's seed, or from :func:`os_seed`."""
    return np.random.default_rng([os_seed() if seed is None else int(seed), index])
