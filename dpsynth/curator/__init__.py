"""Curator: the confidential utility verdict of a column and of a table, and the utility
measures it is built from (ECDF distances, interval overlap, summary statistics)."""
