"""The settings of combining m synthetic sets into one inference, checked without numpy.

:class:`CombineSettings` holds :func:`dpsynth.mechanisms.inference.combine_frame`'s
settings and their rules; the rules that need the synthetic data (the set column, the
number of sets a rule needs) are :func:`dpsynth.mechanisms.inference.combine_frame`'s. The
command line makes the object before it reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpsynth.errors import InputError, require_choice

RULES: tuple[str, ...] = ("thm7", "rubin", "raghunathan", "raab", "single")
"""The combining rules (:mod:`dpsynth.mechanisms.inference` says what each computes)."""
ESTIMANDS: tuple[str, ...] = ("mean", "proportion")
"""The per-set estimands."""


@dataclass(frozen=True)
class CombineSettings:
    """What to combine: the ``estimand`` of ``column`` in each set (numbered by
    ``set_column``), combined by ``rule`` into an interval at ``level``."""

    column: str
    estimand: str
    rule: str = "thm7"
    set_column: str = "synthetic_set"
    level: float = 0.95

    def validate(self) -> CombineSettings:
        """The settings if they are valid, else the first problem as an InputError."""
        require_choice("estimand", self.estimand, ESTIMANDS)
        require_choice("rule", self.rule, RULES)
        require_level(self.level)
        return self


def require_level(level: float) -> float:
    """An interval's coverage level in (0, 1)."""
    lv = float(level)
    if not 0.0 < lv < 1.0:
        raise InputError("level", f"must lie in (0, 1) (got {level!r})")
    return lv


__all__ = ["ESTIMANDS", "RULES", "CombineSettings", "require_level"]
