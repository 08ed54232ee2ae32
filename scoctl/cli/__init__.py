"""The command line: one thin file per command; `render` is the only module that uses rich."""
