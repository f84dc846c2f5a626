"""``python -m gpuflow`` — the same as the ``gpuflow`` console script."""

from gpuflow.cli import main

raise SystemExit(main())
