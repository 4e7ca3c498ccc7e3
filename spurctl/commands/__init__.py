"""One module per command: its options, one request, one use-case call, one render call."""
