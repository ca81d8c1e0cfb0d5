"""Privacy: neighbour relations and the privacy maps they imply, DP noise (OpenDP), the
accounting of a release (censoring bounds, Lipschitz bounds, sensitivities) and the
curator's budget ledger file. Imports only the base modules and ``engine``."""
