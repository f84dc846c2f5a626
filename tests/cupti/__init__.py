"""Tests of the CUPTI collector: ring decoder twins, rings in /dev/shm, collector, plugin."""
