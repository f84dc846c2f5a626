"""What a hub dials, from DNS: the agents an SRV name lists (``--srv _gpuflow._tcp.example.org``).

Each SRV record of the name is one agent, ``target:port`` (priority and weight choose between
equivalent servers, and a hub follows every agent, so they are not used); ``https://NAME`` makes
them https targets. The name is asked again when its answer's TTL runs out (the smallest of its
records', held between :data:`MIN_TTL_S` and :data:`MAX_TTL_S`), so an agent added to DNS is
followed and a removed one forgotten within a TTL; an answer with no record follows none and says
so. A question that fails (no answer, a malformed, oversized or refused one, NXDOMAIN) keeps the
agents of the name's last good answer, says why in one line, and is asked again after
:data:`RETRY_S`.

The query is the stdlib's own: one UDP question (a random id, EDNS0 advertising
:data:`MAX_UDP_ANSWER` bytes) on a socket connected to the resolver, so only its datagrams are
read; a datagram with another id is ignored (an off-path spoofer must guess the id and the port);
a truncated answer (TC) is asked again over TCP, its answer at most 64 KiB by DNS's own framing.
Each attempt has :data:`QUERY_S`. The answer is untrusted: every length and offset is checked
against the message, a name's compression pointers may only point backwards (no loop can form),
names are at most 255 bytes and every target must be a DNS name. The resolver is
``--srv-resolver`` or the first ``nameserver`` of ``/etc/resolv.conf``, read at each question.

Constraints: stdlib only (no DNS library); the follower runs on the hub's event loop; errors are
one line and never repeat what the server sent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from gpuflow.collectors.fleet.targets import Target, TargetError, check_host

DNS_PORT = 53
#: the largest UDP answer read (EDNS0 advertises it); a larger datagram is refused
MAX_UDP_ANSWER = 4096
#: each attempt (UDP, then TCP when truncated) has this long
QUERY_S = 2.0
MIN_TTL_S = 1.0
MAX_TTL_S = 300.0
#: after a failed question, or an answer with no record
RETRY_S = 5.0
RESOLV_CONF = "/etc/resolv.conf"
TYPE_SRV, TYPE_OPT, CLASS_IN = 33, 41, 1
_RCODES = {1: "format error (FORMERR)", 2: "server failure (SERVFAIL)", 3: "no such name (NXDOMAIN)",
           4: "not implemented (NOTIMP)", 5: "refused (REFUSED)"}


class SrvError(ValueError):
    """A name that cannot be asked, or an answer that cannot be used; one line."""


@dataclass(frozen=True)
class SrvName:
    """An SRV name to follow and the scheme of the agents it lists."""

    name: str   #: lower-case, no trailing dot
    scheme: str = "http"

    def __str__(self) -> str:
        return self.name if self.scheme == "http" else f"{self.scheme}://{self.name}"


def parse_srv_name(text: str) -> SrvName:
    """``_gpuflow._tcp.example.org`` or ``https://_gpuflow._tcp.example.org``; ValueError otherwise."""
    text = text.strip()
    scheme = "http"
    for candidate in ("http", "https"):
        if text.lower().startswith(candidate + "://"):
            scheme, text = candidate, text[len(candidate) + 3:]
    try:
        name = check_host(text, "SRV name")
    except TargetError as exc:
        raise ValueError(str(exc)) from None
    if _is_ip(name) or "." not in name:
        raise ValueError("an SRV name is a DNS name such as _gpuflow._tcp.example.org")
    encode_name(name)
    return SrvName(name, scheme)


def parse_resolver(text: str) -> tuple[str, int]:
    """``IP``, ``IP:PORT`` or ``[IPv6]:PORT``; ValueError otherwise."""
    text = text.strip()
    host, port = text, DNS_PORT
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise ValueError("expected IP, IP:PORT or [IPv6]:PORT")
            port = _port(rest[1:])
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        port = _port(port_text)
    if not _is_ip(host):
        raise ValueError("the resolver is an IP address (IP, IP:PORT or [IPv6]:PORT)")
    return str(ipaddress.ip_address(host)), port


def system_resolver() -> tuple[str, int]:
    """The first ``nameserver`` of /etc/resolv.conf; SrvError when it names none."""
    try:
        with open(RESOLV_CONF, encoding="ascii", errors="replace") as f:
            lines = f.read(64 * 1024).splitlines()
    except OSError as exc:
        raise SrvError(f"{RESOLV_CONF}: {exc.strerror}; give --srv-resolver") from None
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver" and _is_ip(words[1].split("%")[0]):
            return words[1].split("%")[0], DNS_PORT
    raise SrvError(f"{RESOLV_CONF} names no nameserver; give --srv-resolver")


# -- the message -------------------------------------------------------------------------------

def encode_name(name: str) -> bytes:
    out = bytearray()
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        if not 1 <= len(raw) <= 63:
            raise ValueError("each label of a DNS name is 1 to 63 characters")
        out += bytes([len(raw)]) + raw
    if len(out) + 1 > 255:
        raise ValueError("a DNS name is at most 255 bytes")
    return bytes(out) + b"\0"


def build_query(query_id: int, name: str) -> bytes:
    """A recursive SRV question for ``name``, with an EDNS0 record advertising MAX_UDP_ANSWER."""
    header = struct.pack("!HHHHHH", query_id, 0x0100, 1, 0, 0, 1)
    opt = b"\0" + struct.pack("!HHIH", TYPE_OPT, MAX_UDP_ANSWER, 0, 0)
    return header + encode_name(name) + struct.pack("!HH", TYPE_SRV, CLASS_IN) + opt


def read_name(message: bytes, offset: int) -> tuple[str, int]:
    """The name at ``offset`` (lower-case, no trailing dot) and the offset after it; a pointer must
    point before the name that uses it, so that no loop can form."""
    labels: list[str] = []
    size, end, floor = 1, None, offset
    while True:
        if offset >= len(message):
            raise SrvError("a name runs past the end of the answer")
        length = message[offset]
        if length & 0xC0 == 0xC0:
            if offset + 1 >= len(message):
                raise SrvError("a name runs past the end of the answer")
            pointer = ((length & 0x3F) << 8) | message[offset + 1]
            if end is None:
                end = offset + 2
            if pointer >= floor:
                raise SrvError("a name's compression pointer does not point backwards")
            offset = floor = pointer
            continue
        if length & 0xC0:
            raise SrvError("a name holds a label of an unknown kind")
        if length == 0:
            return ".".join(labels).lower(), (offset + 1 if end is None else end)
        label = message[offset + 1:offset + 1 + length]
        size += length + 1
        if len(label) != length or size > 255:
            raise SrvError("a name runs past the end of the answer or past 255 bytes")
        labels.append(label.decode("latin-1"))
        offset += 1 + length


def parse_answer(message: bytes, query_id: int, name: str) -> tuple[list[tuple[str, int]], float | None]:
    """The (target, port) of every SRV record of ``name`` in a complete answer, and their smallest
    TTL (None when there is no record); SrvError saying what is wrong with the answer."""
    if len(message) < 12:
        raise SrvError("the answer is shorter than a DNS header")
    answer_id, flags, qdcount, ancount, _, _ = struct.unpack_from("!HHHHHH", message)
    if answer_id != query_id or not flags & 0x8000:
        raise SrvError("the answer is not an answer to the question asked")
    if (flags >> 11) & 0xF:
        raise SrvError("the answer has an unexpected opcode")
    rcode = flags & 0xF
    if rcode:
        raise SrvError(f"the resolver answered {_RCODES.get(rcode, f'error {rcode}')}")
    if qdcount != 1:
        raise SrvError("the answer does not repeat the one question asked")
    asked, offset = read_name(message, 12)
    if offset + 4 > len(message):
        raise SrvError("the answer's question runs past its end")
    qtype, qclass = struct.unpack_from("!HH", message, offset)
    if asked != name or qtype != TYPE_SRV or qclass != CLASS_IN:
        raise SrvError("the answer is to another question")
    offset += 4
    found: dict[tuple[str, int], None] = {}
    ttl: float | None = None
    for index in range(ancount):
        owner, offset = read_name(message, offset)
        if offset + 10 > len(message):
            raise SrvError(f"record {index + 1} runs past the end of the answer")
        rtype, rclass, rttl, rdlength = struct.unpack_from("!HHIH", message, offset)
        offset += 10
        data_end = offset + rdlength
        if data_end > len(message):
            raise SrvError(f"record {index + 1} runs past the end of the answer")
        if rtype == TYPE_SRV and rclass == CLASS_IN and owner == name:
            if rdlength < 7:
                raise SrvError(f"record {index + 1} is too short for an SRV record")
            _, _, port = struct.unpack_from("!HHH", message, offset)
            host, after = read_name(message, offset + 6)
            if after != data_end:
                raise SrvError(f"record {index + 1}: its length does not match its SRV data")
            if host:   # "." is the name saying it offers no such service
                if port == 0:
                    raise SrvError(f"record {index + 1} names port 0")
                try:
                    host = check_host(host, "")
                except TargetError:
                    raise SrvError(f"record {index + 1}: its target is not a DNS name") from None
                found[(host, port)] = None
            ttl = rttl if ttl is None else min(ttl, rttl)
        offset = data_end
    return list(found), ttl


# -- the question ------------------------------------------------------------------------------

async def ask(name: str, resolver: tuple[str, int]) -> tuple[bytes, int]:
    """The complete answer to an SRV question for ``name`` (UDP, then TCP when it was truncated),
    and the question's id."""
    query_id = secrets.randbelow(1 << 16)
    query = build_query(query_id, name)
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in resolver[0] else socket.AF_INET
    ignored = 0
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, resolver)
            await loop.sock_sendall(sock, query)
            async with asyncio.timeout(QUERY_S):
                while True:
                    datagram = await loop.sock_recv(sock, MAX_UDP_ANSWER + 1)
                    if len(datagram) > MAX_UDP_ANSWER:
                        raise SrvError(f"the resolver's answer is larger than {MAX_UDP_ANSWER} bytes")
                    if len(datagram) >= 2 and struct.unpack_from("!H", datagram)[0] == query_id:
                        break
                    ignored += 1   # another question's answer, or a guess at this one's
        except TimeoutError:
            other = f" ({ignored} datagrams with another id ignored)" if ignored else ""
            raise SrvError(f"no answer from the resolver within {QUERY_S:.0f} s{other}") from None
        except OSError as exc:
            raise SrvError(f"the question could not be asked ({exc.strerror or type(exc).__name__})") from None
    if len(datagram) >= 4 and datagram[2] & 0x02:   # TC: ask again over TCP
        return await _ask_tcp(query, resolver), query_id
    return datagram, query_id


async def _ask_tcp(query: bytes, resolver: tuple[str, int]) -> bytes:
    writer = None
    try:
        async with asyncio.timeout(QUERY_S):
            reader, writer = await asyncio.open_connection(resolver[0], resolver[1], limit=1 << 16)
            writer.write(struct.pack("!H", len(query)) + query)
            await writer.drain()
            (length,) = struct.unpack("!H", await reader.readexactly(2))
            message = await reader.readexactly(length)   # at most 64 KiB by DNS's framing
    except TimeoutError:
        raise SrvError(f"the answer was truncated and TCP gave none within {QUERY_S:.0f} s") from None
    except (OSError, asyncio.IncompleteReadError) as exc:
        raise SrvError(f"the answer was truncated and TCP failed ({type(exc).__name__})") from None
    finally:
        if writer is not None:
            writer.close()
    if len(message) >= 4 and message[2] & 0x02:
        raise SrvError("the answer was truncated even over TCP")
    return message


async def resolve(srv: SrvName, resolver: tuple[str, int] | None) -> tuple[tuple[Target, ...], float | None]:
    """The targets ``srv`` lists now and the answer's TTL; SrvError saying why not."""
    message, query_id = await ask(srv.name, resolver or system_resolver())
    found, ttl = parse_answer(message, query_id, srv.name)
    return tuple(Target(srv.scheme, host, port) for host, port in found), ttl


class SrvFollower:
    """Every SRV name's targets, asked again as their TTLs run out; ``on_change`` is called (on the
    loop) when a name's targets or its problem change."""

    def __init__(self, names: Sequence[SrvName], resolver: tuple[str, int] | None,
                 on_change: Callable[[], Any]) -> None:
        self.names, self.resolver, self.on_change = tuple(names), resolver, on_change
        self._targets: dict[SrvName, tuple[Target, ...]] = {}
        self._problems: dict[SrvName, str] = {}

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(t for name in self.names for t in self._targets.get(name, ()))

    def problems(self) -> tuple[str, ...]:
        return tuple(self._problems[name] for name in self.names if name in self._problems)

    async def run(self) -> None:
        await asyncio.gather(*(self._follow(name) for name in self.names))

    async def _follow(self, srv: SrvName) -> None:
        while True:
            try:
                targets, ttl = await resolve(srv, self.resolver)
            except SrvError as exc:
                kept = len(self._targets.get(srv, ()))
                self._set(srv, self._targets.get(srv, ()),
                          f"SRV {srv}: {exc}; following the {kept} agents it listed before")
                await asyncio.sleep(RETRY_S)
                continue
            problem = None if targets else f"SRV {srv}: no agent is listed (no SRV record)"
            self._set(srv, targets, problem)
            await asyncio.sleep(RETRY_S if ttl is None else min(max(float(ttl), MIN_TTL_S), MAX_TTL_S))

    def _set(self, srv: SrvName, targets: tuple[Target, ...], problem: str | None) -> None:
        if self._targets.get(srv) == targets and self._problems.get(srv) == problem and srv in self._targets:
            return
        self._targets[srv] = targets
        if problem is None:
            self._problems.pop(srv, None)
        else:
            self._problems[srv] = problem
        self.on_change()


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError("the resolver's port is a number from 1 to 65535")
    return int(text)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
