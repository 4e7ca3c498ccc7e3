"""The only code that changes a node: agent cancels and the journal that records them."""
