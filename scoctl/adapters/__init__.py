"""Adapters: the only modules that import outside client libraries (lazily)."""
