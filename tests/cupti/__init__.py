"""Tests of the CUPTI collector: ring decoder twins, the ring socket and handed-over rings, collector, plugin."""
