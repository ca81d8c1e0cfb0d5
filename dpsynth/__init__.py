"""dpsynth: differentially private Bayesian data synthesis.

Reference implementation of the pseudo posterior, censoring and modips
mechanisms of Hu, Williams & Savitsky; Savitsky, Hu & Williams; and Liu.

The package, read top-down (see CONTRIBUTING.md):

* ``engine``, ``diagnostics``, ``models``: the Stan boundary (compile, sample, the
  shipped programs and their numpy mirrors);
* ``weights``, ``mechanisms``: the weighted and censored pseudo posterior synthesizers;
* ``privacy``, ``histogram``: DP primitives, sensitivities, the budget ledger, Lipschitz
  accounting; the perturbed histogram and modips' histogram synthesis;
* ``modips``, ``inference``: Liu's modips and inference from m synthetic sets;
* ``release``, ``cli``: the one release path (public report and confidential
  diagnostics) and the command line;
* ``studies``: the papers' simulation studies, their profiles, runner and figures.
"""

from dpsynth.errors import InputError

__version__ = "0.2.0"

__all__ = ["InputError", "__version__"]
