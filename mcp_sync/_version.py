"""The package version, kept apart so that every layer can read it."""

__version__ = "0.1.0"
