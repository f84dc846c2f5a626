"""Test support shipped with the package: scripted collectors for tests, benches and UI work.

Nothing here touches a GPU. Load the fake collector with ``--plugin gpuflow.testing.fake_collector``
or ``GPUFLOW_PLUGINS=gpuflow.testing.fake_collector``.
"""
