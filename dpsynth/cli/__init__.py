"""The command line: it parses arguments, calls the library and prints (``commands`` for the
single-column commands, ``table_commands`` for whole tables, ``options_table`` for the flags
and their library keywords, ``files`` for reading and writing the user's files)."""
