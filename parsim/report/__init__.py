"""Things a person looks at: tables, text grids, Chrome traces, plots."""
