"""Pure decisions over frozen values: no I/O, no clock, no randomness, no logging."""
