"""Test and benchmark support shipped with the package: scripted collectors, the A/B switch.

Nothing here touches a GPU. Load the fake collector with ``--plugin gpuflow.testing.fake_collector``
or ``GPUFLOW_PLUGINS=gpuflow.testing.fake_collector``. :mod:`gpuflow.testing.ab_period` is the
``GPUFLOW_AB_PERIOD_MS`` switch the overhead benchmark uses to turn GPUFlow's work on and off in
alternation; collectors that honour it read it from here.
"""
