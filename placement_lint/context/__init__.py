"""Build the context: which distributed setup runs a file, and the evidence for it."""
