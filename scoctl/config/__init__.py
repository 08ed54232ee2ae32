"""The config file, claims files, YAML with line numbers and ranking documents."""
