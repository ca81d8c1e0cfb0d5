"""The papers' studies: one module per paper-section family, their profiles and runner.

* ``censoring``: Hu, Williams & Savitsky, Sections 4 (Beta(0.5, 3) simulation) and 5 (SDR).
* ``vector_weighted``: Savitsky, Hu & Williams, Sections 3-5 and the local-to-global study.
* ``modips_sections``: Liu, Section 5 (the tables and figures of notebook 07), built on
  ``modips_simulation`` (the SBS Monte Carlo engine).
* ``runner``: replicates in parallel with an on-disk cache keyed on the code they import.
* ``profiles``: ``ci`` profiles stated as overrides of ``paper``.
* ``plots``: the figures; ``notebook``: helpers the notebooks share; ``reproduction``: the
  paper-vs-run reproduction checks; ``results``: committed paper-scale tables; ``real_data``: the real
  counts study (beyond the papers).

Studies simulate their data or use public datasets, so their fits and caches hold nothing
confidential.
"""
