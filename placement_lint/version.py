"""The release, for the command line, the caches' folder and the SARIF driver: a module of its own, so
they need not import the package's `__init__`, which brings in the Python API on first use."""

__version__ = "0.11.0"
