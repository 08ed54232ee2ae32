"""The local simulated region: loopback emulators used by the demo, CI dry-runs and tests."""
