"""Mechanisms: the registry of declarations (name, guarantee, neighbour relations with
their privacy maps, options, capabilities, the function that runs each), record weights, the
pseudo posterior ``Synthesizer``, the perturbed histogram, modips and inference from m
synthetic sets, and the empirical privacy audits."""
