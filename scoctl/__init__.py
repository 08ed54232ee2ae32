"""scoctl: the command-line tool of a Spot Capacity Orchestrator for on-premises OpenStack."""

__version__ = "0.2.0"
