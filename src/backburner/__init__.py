"""backburner: prove and apply background priorities so bulk work stops hurting interactive use."""

__version__ = "0.1.0"
