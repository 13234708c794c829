"""Schema handling: column naming, flattening, type conflicts, modes and the registry."""
