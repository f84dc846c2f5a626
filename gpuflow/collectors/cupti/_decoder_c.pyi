"""Types of the compiled ring decoder (``_decoder_c.pyx``), for type checkers, which cannot read
the extension: its ``RingDecoder`` is a class that implements
:class:`gpuflow.collectors.cupti.protocol.RingDecoder` exactly, as the pure-Python twin does (the
tests compare all three). The protocol is the one written definition of that surface."""

from typing import Any

from gpuflow.collectors.cupti.protocol import RingDecoder as _RingDecoderProtocol

RingDecoder: type[_RingDecoderProtocol]
Retention: Any
RETAIN_CONSTANTS: dict[str, int]
LIMITS: dict[str, int]
HEADER_CONSTANTS: dict[str, Any]
