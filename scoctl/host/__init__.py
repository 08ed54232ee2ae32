"""What lives on the host beside the state: run lock, token budget file, spool, metrics file."""
