"""A fake Kubernetes API server and a fake kubelet pod-resources socket, for the workload tests.

* :class:`FakeApiServer` — plain HTTP on a loopback port answering ``GET /api/v1/pods`` with the
  pods it is given (JSON as the API server writes it), recording each request's path and
  Authorization header; it can answer a status instead, or a body of any size, dripped slowly.
* :class:`FakePodResources` — a real gRPC server (grpcio) on a Unix socket serving
  ``v1.PodResourcesLister/List``, its answer encoded here from (namespace, pod, {container:
  {resource: [device ids]}}) with the protobuf wire format, or raw bytes given by the test.

:func:`pod` builds one pod of a list the way the API server writes it.

Constraints: loopback and the test's own temporary directory only; every server is stopped by
its owner (``stop``); no wait without a timeout.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpuflow.export.protowire import len_field, text_field


def pod(uid: str, name: str, namespace: str, containers: dict[str, str] | None = None,
        mirror: str | None = None) -> dict:
    """A pod as the API server lists it; ``containers``: name → containerID (``containerd://…``)."""
    meta = {"uid": uid, "name": name, "namespace": namespace, "resourceVersion": "4711",
            "labels": {"app": name}}
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": mirror}
    return {"metadata": meta, "spec": {"nodeName": "node-a"},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": n, "containerID": cid, "ready": True} for n, cid in (containers or {}).items()]}}


class FakeApiServer:
    """``GET /api/v1/pods`` on 127.0.0.1; ``pods`` may be changed while it runs."""

    def __init__(self, pods: list[dict]) -> None:
        self.pods = pods
        self.requests: list[tuple[str, str | None]] = []  #: (path, Authorization)
        self.status = 200  #: what it answers
        self.body: bytes | None = None  #: a body to send instead of the pods list
        self.drip_s = 0.0  #: seconds between the body's bytes (a slow server)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.requests.append((self.path, self.headers.get("Authorization")))
                if owner.status != 200:
                    self.send_response(owner.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = owner.body if owner.body is not None else json.dumps(
                    {"kind": "PodList", "apiVersion": "v1", "items": owner.pods}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if owner.drip_s:
                        for i in range(len(body)):
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                            time.sleep(owner.drip_s)
                    else:
                        self.wfile.write(body)
                except OSError:
                    pass  # the client gave up

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def encode_list(pods: list[tuple[str, str, dict[str, dict[str, list[str]]]]]) -> bytes:
    """A ListPodResourcesResponse: (namespace, pod, {container: {resource: [device ids]}})."""
    out = b""
    for namespace, name, containers in pods:
        body = text_field(1, name) + text_field(2, namespace)
        for container, resources in containers.items():
            c = text_field(1, container)
            for resource, ids in resources.items():
                c += len_field(2, text_field(1, resource) + b"".join(text_field(2, i) for i in ids))
            c += len_field(3, b"\x08\x02")  # cpu_ids: an unknown-to-us field, skipped
            body += len_field(3, c)
        out += len_field(1, body)
    return out


class FakePodResources:
    """``v1.PodResourcesLister/List`` on a Unix socket, answering ``answer`` (bytes)."""

    def __init__(self, path: str, answer: bytes) -> None:
        import grpc

        self.answer = answer
        self.calls = 0
        owner = self

        def list_pods(request: bytes, context) -> bytes:
            owner.calls += 1
            return owner.answer

        handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(
                list_pods, request_deserializer=lambda raw: raw, response_serializer=lambda raw: raw)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                                  options=[("grpc.max_send_message_length", 64 << 20)])
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()
        self.path = path

    def stop(self) -> None:
        self.server.stop(grace=None).wait(5)
