"""The package version: a leaf module, so that the compilers and crash reports can read it
without importing the package root."""

__version__ = "0.1.0"
