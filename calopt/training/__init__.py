"""Training: the one loop, the pipeline around it, checkpoints, thresholds and aggregation."""
