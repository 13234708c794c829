"""Schema handling: column naming (and, later, flattening, widening and the registry)."""
