"""Transport: the Falcon WSGI app (UI, JSON, SSE, Prometheus) and the servers that host it."""
