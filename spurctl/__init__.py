"""spurctl: keep a Spur GPU cluster honest."""

__version__ = "0.1.0"
