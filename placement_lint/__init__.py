"""placement-lint: find model placements that break distributed training, before the GPUs are booked."""

__version__ = "0.1.0"
