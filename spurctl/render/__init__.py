"""Text out (tables, JSON, CSV, Markdown, Prometheus); no decisions."""
