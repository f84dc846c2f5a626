"""Pod, namespace and container names from the Kubernetes API server: this node's pods, listed.

A process's cgroup gives its pod UID and container id; the names are the API server's. The agent
lists the pods of its own node (``GET /api/v1/pods?fieldSelector=spec.nodeName=<node>``) when a
process shows a pod or a container it does not know (at most every ``gap_s``; a key still unknown
after a list is not asked for again for ``miss_s``), and every ``every_s`` otherwise. A UID never
changes its pod's name, so nothing is watched: the names are looked up when a new pod or
container appears on a GPU, which is rare, and a Kubernetes role with ``get``/``list`` on pods is
all it needs (docs/fleet.md, "Kubernetes permissions").

Where the API is: inside a pod, ``KUBERNETES_SERVICE_HOST``/``_PORT`` with the service account's
token and CA (:func:`in_cluster`); or a URL given (``GPUFLOW_K8S_API``). Plain ``http`` is
refused except to a loopback address (``kubectl proxy``, the tests): the token must not cross a
network in clear text. The token file is read again for every request (projected tokens rotate).

A static pod's mirror on the API server has a UID of its own: its cgroup carries the UID of the
kubelet's manifest, which the mirror names in its ``kubernetes.io/config.mirror`` annotation;
both index it.

Constraints: runs on the Refresher's thread only. Standard library only (``http.client``, ``ssl``):
no client library to install, no proxy from the environment, no redirect followed (the token
would follow it). The answer is read up to :data:`MAX_BYTES` within :data:`DEADLINE_S` whatever
the server sends, and every name and id in it is checked (Kubernetes' own limits) before it is
kept.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import ssl
import time
import urllib.parse
from typing import Any, Mapping

from gpuflow.workload.refresh import FetchFailed, Refresher
from gpuflow.workload.resolver import PodNames

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MAX_BYTES = 64 * 1024 * 1024  #: a node's pods list (~110 pods of ~10-100 kB each, generously)
DEADLINE_S = 20.0  #: one list, connect to last byte
TIMEOUT_S = 5.0  #: any one read or connect
MAX_PODS = 10_000

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  #: DNS subdomain (pod names)
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  #: DNS label (namespaces, containers)
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
_CONTAINER = re.compile(r"(?P<rt>containerd|cri-o|docker)://(?P<id>[0-9a-f]{64})")


class ApiConfig:
    """Where the API server is and how to present ourselves to it."""

    def __init__(self, url: str, token_file: str | None, ca_file: str | None) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise ValueError(f"expected an https:// URL of the Kubernetes API server, got {url!r}")
        if parsed.scheme == "http" and not _loopback(parsed.hostname):
            raise ValueError(f"refusing plain http to {parsed.hostname}: the service account token "
                             "would cross the network in clear text (use https, or kubectl proxy on loopback)")
        self.scheme, self.host = parsed.scheme, parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.prefix = parsed.path.rstrip("/")
        self.token_file, self.ca_file = token_file, ca_file

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.prefix}"


def in_cluster(environ: Mapping[str, str]) -> ApiConfig | None:
    """The API server as a pod sees it (service host and port, the service account's token and CA),
    or None outside a pod."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not os.path.exists(f"{SA_DIR}/token"):
        return None
    host = f"[{host}]" if ":" in host else host
    return ApiConfig(f"https://{host}:{port}", f"{SA_DIR}/token", f"{SA_DIR}/ca.crt")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PodIndex:
    """pod UID → (name, namespace, {container id: (container name, runtime)})."""

    def __init__(self, pods: dict[str, tuple[str, str, dict[str, tuple[str, str]]]]) -> None:
        self.pods = pods


class KubeApiNames:
    """:class:`~gpuflow.workload.resolver.NameSource` over the node's pods on the API server."""

    def __init__(self, config: ApiConfig, node: str, *, every_s: float = 300.0, gap_s: float = 5.0,
                 miss_s: float = 30.0) -> None:
        self.config, self.node = config, node
        self.refresher = Refresher("Kubernetes API", self._fetch, every_s=every_s, gap_s=gap_s,
                                   miss_s=miss_s)

    @property
    def version(self) -> int:
        return self.refresher.version

    @property
    def problem(self) -> str | None:
        return self.refresher.problem

    def names(self, pod_uid: str, container_id: str | None) -> PodNames | None:
        index = self.refresher.index
        pod = index.pods.get(pod_uid) if index is not None else None
        if pod is None:
            self.refresher.want(pod_uid)
            return None
        name, namespace, containers = pod
        container = containers.get(container_id) if container_id is not None else None
        if container_id is not None and container is None:
            self.refresher.want((pod_uid, container_id))  # restarted: a new container id
        return PodNames(name, namespace, container[0] if container else None,
                        container[1] if container else None)

    def start(self) -> None:
        self.refresher.start()

    def stop(self) -> None:
        self.refresher.stop()

    # -- the fetch, on the refresher's thread ---------------------------------------------------
    def _fetch(self) -> PodIndex:
        query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={self.node}"})
        body = self._get(f"{self.config.prefix}/api/v1/pods?{query}")
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise FetchFailed("the Kubernetes API server's pods list is not JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
            raise FetchFailed("the Kubernetes API server's answer is not a pods list")
        return PodIndex(parse_pods(doc["items"][:MAX_PODS]))

    def _get(self, path: str) -> bytes:
        cfg = self.config
        headers = {"Accept": "application/json", "User-Agent": "gpuflow"}
        token = _read_token(cfg.token_file)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if cfg.scheme == "https":
            context = ssl.create_default_context(cafile=cfg.ca_file if cfg.ca_file else None)
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                cfg.host, cfg.port, timeout=TIMEOUT_S, context=context)
        else:
            conn = http.client.HTTPConnection(cfg.host, cfg.port, timeout=TIMEOUT_S)
        deadline = time.monotonic() + DEADLINE_S
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            if resp.status in (401, 403):
                raise FetchFailed(f"the Kubernetes API server refused to list this node's pods "
                                  f"({resp.status}): the agent's service account needs get and list "
                                  "on pods (docs/fleet.md, Kubernetes permissions)")
            if resp.status != 200:
                raise FetchFailed(f"the Kubernetes API server answered {resp.status} to the pods list")
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise FetchFailed(f"the Kubernetes API server took over {DEADLINE_S:g} s to list "
                                      "this node's pods")
                chunk = resp.read1(65536)
                if not chunk:
                    return b"".join(chunks)
                size += len(chunk)
                if size > MAX_BYTES:
                    raise FetchFailed(f"the Kubernetes API server's pods list is over "
                                      f"{MAX_BYTES >> 20} MiB: not read")
                chunks.append(chunk)
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            raise FetchFailed(f"the Kubernetes API server at {cfg.url} cannot be reached "
                              f"({type(exc).__name__})") from None
        finally:
            conn.close()


def _read_token(path: str | None) -> str | None:
    """The service account token (at most 16 KiB, printable ASCII), or None where there is none."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read(16 * 1024 + 1)
    except OSError:
        return None
    token = raw.strip()
    if not token or len(raw) > 16 * 1024 or not all(0x21 <= b <= 0x7e for b in token):
        raise FetchFailed(f"the service account token in {path} is not a token")
    return token.decode("ascii")


def parse_pods(items: list[Any]) -> dict[str, tuple[str, str, dict[str, tuple[str, str]]]]:
    """The index of a pods list's items: every pod whose UID, name and namespace are well-formed,
    under its UID and its mirror annotation's, with its containers' ids (malformed ones left out)."""
    pods: dict[str, tuple[str, str, dict[str, tuple[str, str]]]] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata")
        if not isinstance(meta, dict):
            continue
        uid, name, namespace = meta.get("uid"), meta.get("name"), meta.get("namespace")
        if not (_ok(_UID, uid) and _ok(_NAME, name) and _ok(_LABEL, namespace)):
            continue
        containers: dict[str, tuple[str, str]] = {}
        status = item.get("status")
        if isinstance(status, dict):
            for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
                entries = status.get(key)
                for c in entries[:1000] if isinstance(entries, list) else ():
                    if not isinstance(c, dict) or not _ok(_LABEL, c.get("name")):
                        continue
                    cid = c.get("containerID")
                    m = _CONTAINER.fullmatch(cid) if isinstance(cid, str) else None
                    if m:
                        containers[m.group("id")] = (c["name"], m.group("rt"))
        entry = (name, namespace, containers)
        pods[uid] = entry
        annotations = meta.get("annotations")
        mirror = annotations.get("kubernetes.io/config.mirror") if isinstance(annotations, dict) else None
        if _ok(_UID, mirror):
            pods.setdefault(mirror, entry)
    return pods


def _ok(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None
