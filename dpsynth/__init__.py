"""dpsynth: differentially private Bayesian data synthesis.

Reference implementation of the pseudo posterior, censoring and modips mechanisms of Hu,
Williams & Savitsky; Savitsky, Hu & Williams; and Liu. The packages, in the order of
:data:`LAYERS` (each imports only from itself and those before it; CONTRIBUTING.md has the
map of every module): the base modules (``errors``, ``io``, ``entropy``), ``engine``,
``privacy``, ``models``, ``mechanisms``, ``curator``, ``release``, ``table``, ``cli`` and
``studies``.

The public API below is imported on first use, so that ``python -m dpsynth`` refuses a bad
command before the scientific stack is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

from dpsynth.errors import InputError

__version__ = "0.2.0"

LAYERS: tuple[str, ...] = (
    "base",
    "engine",
    "privacy",
    "models",
    "mechanisms",
    "curator",
    "release",
    "table",
    "cli",
    "studies",
)
"""The packages from base to command line: a module imports only from its own package and
those before it (``tests/test_layers.py``); "base" is the top-level modules."""

_API: dict[str, str] = {
    "synthesize": "dpsynth.release.single",
    "Release": "dpsynth.release.single",
    "plan": "dpsynth.release.plan",
    "synthesize_table": "dpsynth.table.pipeline",
    "Synthesizer": "dpsynth.mechanisms.posterior",
    "Sampler": "dpsynth.sampler",
    "MECHANISMS": "dpsynth.mechanisms.registry",
    "combine": "dpsynth.mechanisms.inference",
    "from_pieces": "dpsynth.models.pieces",
    "BudgetLedger": "dpsynth.privacy.accounting",
}
"""The public API: each name and the module that is its one home."""

__all__ = ["InputError", "LAYERS", "__version__", *_API]


def __getattr__(name: str) -> Any:
    """Import a public name's home on first use (PEP 562)."""
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'dpsynth' has no attribute {name!r}")
