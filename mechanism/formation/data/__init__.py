"""Package data: the compiled typed-formation 0.1 profile and its JSON Schema (inert bytes)."""
