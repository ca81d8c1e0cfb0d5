"""The one source of fresh randomness for a private release: the operating system's entropy.

Every unseeded random choice a release makes on the confidential data (Stan's seed, a
column's subsample, its conditional draws) starts here, and nothing drawn here is
published. The test suite replaces :func:`os_seed` by a fixed sequence per test, so that its
statistical tests run with fixed seeds while taking the unseeded (labelled) path.
"""

from __future__ import annotations

import secrets

import numpy as np

__all__ = [
    "STREAMS", "column_seed", "derived_seed", "draw_seed", "os_seed", "partition_stream", "stream",
]  # fmt: skip

STREAMS: dict[str, int] = {
    "ph-conditional": 2,  # a PH column's own cells drawn given its synthetic parents
    "fit-rows": 3,  # the k-of-n subsample a model column is fitted to
    "marginal-histogram": 4,  # the seed of a column's marginal histogram release
    "rank-map": 5,  # ties of a rank-mapped column
    "marginal-centre": 6,  # the pseudo-data of a marginal centring
    "partition-draw": 7,  # a column's set drawn at a partition of a table (with k and p)
    "ph-deal": 8,  # a PH column's sample dealt to a table's partitions
}
"""The named random streams of a table column, each drawn from the column's seed: one
name per use, so that no two uses share a stream."""

_COLUMN_SALT = 29
"""Mixed into a table's seed with a column's position (:func:`column_seed`)."""


def os_seed() -> int:
    """A fresh seed from the operating system's entropy (never published)."""
    return secrets.randbits(63)


def stream(seed: int | None, name: str) -> np.random.Generator:
    """The generator named ``name`` (:data:`STREAMS`) of a release: from the user's seed, or
    from :func:`os_seed`."""
    return np.random.default_rng([os_seed() if seed is None else int(seed), STREAMS[name]])


def partition_stream(seed: int, j: int, k: int, p: int) -> np.random.Generator:
    """The generator of column j's set k at partition p of a table drawn a partition at a
    time, from the table's draw seed (:func:`draw_seed`): the same partition drawn again
    (for its verdict, then its file) is the same records."""
    return np.random.default_rng([int(seed), STREAMS["partition-draw"], j, k, p])


def draw_seed(seed: int | None) -> int:
    """The seed of a table's partition draws: from the user's seed, or :func:`os_seed`
    (kept in the release's memory, never published)."""
    if seed is None:
        return os_seed()
    return int(np.random.SeedSequence([int(seed), _DRAW_SALT]).generate_state(1)[0])


_DRAW_SALT = 31
"""Mixed into a table's seed for its partition draws (:func:`draw_seed`)."""


def column_seed(seed: int, j: int) -> int:
    """The seed of column j (its position in the synthesis order) of a seeded table."""
    return int(np.random.SeedSequence([int(seed), _COLUMN_SALT, j]).generate_state(1)[0])


def derived_seed(seed: int, name: str) -> int:
    """The seed of the step named ``name`` (:data:`STREAMS`) of a seeded column."""
    return column_seed(seed, STREAMS[name])
