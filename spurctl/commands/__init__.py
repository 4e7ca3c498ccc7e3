"""One module per command: its options, one request (every cross-option check), one
use-case call, one render call, the exit status returned (docs/layout.md)."""
