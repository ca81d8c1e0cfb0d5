"""dpsynth: differentially private Bayesian data synthesis.

Reference implementation of the pseudo posterior, censoring and modips
mechanisms of Hu, Williams & Savitsky; Savitsky, Hu & Williams; and Liu.
"""

from dpsynth.errors import InputError

__version__ = "0.1.0"

__all__ = ["InputError", "__version__"]
