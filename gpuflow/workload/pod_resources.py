"""Which GPUs the kubelet allocated to each container: its pod-resources API, over its gRPC socket.

The kubelet serves ``v1.PodResourcesLister`` on a Unix socket
(``/var/lib/kubelet/pod-resources/kubelet.sock``). Its ``List`` answers, for every pod on the
node, each container's devices by resource name; the NVIDIA device plugin's resources are
``nvidia.com/gpu`` (and ``nvidia.com/mig-…``), their device ids the GPUs' UUIDs (or indexes, with
its ``index`` id strategy). dcgm-exporter calls it on every scrape, which is slow on a busy node;
here it is called every ``every_s`` and when a process shows a pod the last answer did not have
(at most every ``gap_s``; a pod still missing is not asked for again for ``miss_s``), by a thread
of its own (:class:`~gpuflow.workload.refresh.Refresher`).

The messages are decoded here, by hand, from the protobuf wire format (``api.proto`` of
k8s.io/kubelet/pkg/apis/podresources/v1: ``ListPodResourcesResponse{1: PodResources}``,
``PodResources{1: name, 2: namespace, 3: ContainerResources}``, ``ContainerResources{1: name,
2: ContainerDevices}``, ``ContainerDevices{1: resource_name, 2: device_ids}``), so the only
dependency is grpcio (the ``kubernetes`` extra), imported when a socket is used.

Constraints: the answer is bounded (:data:`MAX_BYTES`, gRPC's own receive limit) and the call by
:data:`TIMEOUT_S`; the decoder walks each message once, skips fields it does not know, refuses a
truncated or malformed one, and keeps at most :data:`MAX_PODS` pods of well-formed names.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator

from gpuflow.workload.refresh import FetchFailed, Refresher

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
MAX_BYTES = 16 * 1024 * 1024
TIMEOUT_S = 5.0
MAX_PODS = 10_000
GPU_RESOURCE_PREFIX = "nvidia.com/"

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")  #: a device id: GPU-<uuid>, MIG-<uuid>, 0
_RESOURCE = re.compile(r"[A-Za-z0-9./_-]{1,253}")  #: nvidia.com/gpu

#: (namespace, pod) → {container: its GPU device ids}
Allocations = dict[tuple[str, str], dict[str, tuple[str, ...]]]


class PodResourcesAllocations:
    """:class:`~gpuflow.workload.resolver.AllocationSource` over the kubelet's pod-resources socket."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, *, every_s: float = 30.0, gap_s: float = 5.0,
                 miss_s: float = 30.0) -> None:
        import grpc  # the 'kubernetes' extra; the caller checks it is there (available())

        self.socket_path = socket_path
        self._channel = grpc.insecure_channel(
            "unix://" + os.path.abspath(socket_path),
            options=[("grpc.max_receive_message_length", MAX_BYTES),
                     ("grpc.max_send_message_length", 1024), ("grpc.enable_http_proxy", 0)])
        self._list = self._channel.unary_unary(LIST_METHOD, request_serializer=lambda _: b"",
                                               response_deserializer=lambda raw: raw)
        self._rpc_error = grpc.RpcError
        self.refresher = Refresher("kubelet pod-resources", self._fetch, every_s=every_s, gap_s=gap_s,
                                   miss_s=miss_s)

    @property
    def version(self) -> int:
        return self.refresher.version

    @property
    def problem(self) -> str | None:
        return self.refresher.problem

    def devices(self, namespace: str, pod_name: str, container_name: str | None) -> tuple[str, ...] | None:
        index: Allocations | None = self.refresher.index
        pod = index.get((namespace, pod_name)) if index is not None else None
        if pod is None:
            self.refresher.want((namespace, pod_name))
            return None
        if container_name is None:
            return tuple(sorted({d for ids in pod.values() for d in ids}))
        return pod.get(container_name)

    def start(self) -> None:
        self.refresher.start()

    def stop(self) -> None:
        self.refresher.stop()
        self._channel.close()

    def _fetch(self) -> Allocations:
        try:
            raw = self._list(b"", timeout=TIMEOUT_S)
        except self._rpc_error as exc:
            code = exc.code() if hasattr(exc, "code") else None
            raise FetchFailed(f"the kubelet's pod-resources socket {self.socket_path} did not answer "
                              f"List ({getattr(code, 'name', 'error')})") from None
        try:
            return decode_list_response(raw)
        except ValueError as exc:
            raise FetchFailed(f"the kubelet's pod-resources answer is malformed: {exc}") from None


def available() -> str | None:
    """None when grpcio can be imported, else why not (one line)."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        return "grpcio is not installed (pip install 'gpuflow[kubernetes]')"
    return None


# -- the wire format ---------------------------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint over 64 bits")


def fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: an int for varints and fixed ones, bytes for
    length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise ValueError("truncated fixed64")
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("length past the end of the message")
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            if pos + 4 > end:
                raise ValueError("truncated fixed32")
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def _text(value: Any, pattern: re.Pattern[str]) -> str | None:
    if not isinstance(value, bytes):
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if pattern.fullmatch(text) else None


def decode_list_response(raw: bytes) -> Allocations:
    """A ListPodResourcesResponse → (namespace, pod) → {container: GPU device ids}."""
    out: Allocations = {}
    for number, wire, pod in fields(raw):
        if number != 1 or wire != 2 or len(out) >= MAX_PODS:
            continue
        name = namespace = None
        containers: dict[str, tuple[str, ...]] = {}
        for n, w, v in fields(pod):
            if w != 2:
                continue
            if n == 1:
                name = _text(v, _NAME)
            elif n == 2:
                namespace = _text(v, _NAME)
            elif n == 3:
                container, ids = _container(v)
                if container is not None:
                    containers[container] = ids
        if name is not None and namespace is not None:
            out[(namespace, name)] = containers
    return out


def _container(raw: bytes) -> tuple[str | None, tuple[str, ...]]:
    name, ids = None, []
    for n, w, v in fields(raw):
        if w != 2:
            continue
        if n == 1:
            name = _text(v, _NAME)
        elif n == 2:  # ContainerDevices
            resource, device_ids = None, []
            for dn, dw, dv in fields(v):
                if dw != 2:
                    continue
                if dn == 1:
                    resource = _text(dv, _RESOURCE)
                elif dn == 2:
                    device = _text(dv, _ID)
                    if device is not None and len(device_ids) < 256:
                        device_ids.append(device)
            if resource is not None and resource.startswith(GPU_RESOURCE_PREFIX):
                ids.extend(device_ids)
    return name, tuple(ids)
