"""The stages: read → decide → act → record. Each is one transaction on the state file."""
