"""Table: the curator's table spec (columns, types, levels, bounds, options) and the
whole-table release built column by column under one budget."""
