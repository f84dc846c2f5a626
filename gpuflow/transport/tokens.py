"""The access token: what characters it may hold, when it is too weak, where it is read from.

One set of rules for ``gpuflow watch``/``run`` and for ``get_app()`` under gunicorn
(gpuflow.transport.settings calls them; docs/security.md, "Token", explains them to users):

* **Form** (on every bind): 1 to :data:`MAX_TOKEN_CHARS` printable ASCII characters, no space.
  The page sends the token in an ``Authorization`` header, where anything else cannot travel
  reliably (browsers refuse characters beyond Latin-1 there, and servers strip blanks).
* **Strength** (:func:`weakness`; refused on a bind other machines can reach, a warning on
  loopback): at least 16 characters, at least 6 different ones, and at least 12 "symbols" where
  a common word or password (a short built-in list, matched through the usual letter-for-digit
  swaps), a run of 3 or more characters that repeat or step by one (``aaa``, ``abc``, ``4321``)
  and a repetition of an earlier chunk each count as one. Random tokens from the usual
  generators pass (32 hex digits, ``secrets.token_urlsafe(16)`` and longer, a UUID, 12 random
  bytes in base64); a 16-hex-digit one is refused about once in 1,500 draws.
* **A token file** (:func:`read_token_file`) is opened without blocking (a FIFO cannot hang the
  start) and judged on the open descriptor, never on the path: a regular file, owned by the
  user running gpuflow, with no permission for group or others, at most 4 KiB; one trailing
  newline is dropped.
* **A generated token** (``auto``) is :func:`generate_token`'s: 32 random bytes, URL-safe.

Constraints: no secret ever goes into an error message; nothing here logs.
"""

from __future__ import annotations

import os
import secrets
import stat

MAX_TOKEN_CHARS = 1024
MAX_TOKEN_FILE_BYTES = 4096
GENERATE = "auto"  #: the token value that asks for a generated token

MIN_LENGTH = 16
MIN_DISTINCT = 6
MIN_SYMBOLS = 12
RUN_LENGTH = 3

#: Words that make up most weak passwords, lower-case, after undoing letter-for-digit swaps.
COMMON_WORDS = (
    "password", "passwd", "secret", "token", "gpuflow", "admin", "letmein", "qwerty", "azerty",
    "asdf", "zxcv", "welcome", "changeme", "default", "monkey", "dragon", "master", "login",
    "iloveyou", "trustno", "sunshine", "princess", "football", "baseball", "shadow", "superman",
    "hello", "test", "guest", "root", "user", "nvidia", "cuda", "summer", "winter", "spring",
    "autumn", "abc123", "1q2w3e",
)
_UNSWAP = str.maketrans("0134578@$!|", "oieastbasii")


class TokenError(ValueError):
    """A token, or a token file, that cannot be used; the message is one line, without the token."""


def check_form(token: str, where: str) -> None:
    """TokenError unless ``token`` is 1..MAX_TOKEN_CHARS printable ASCII characters, no space."""
    if not token:
        raise TokenError(f"{where} must not be empty")
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenError(f"{where} is longer than {MAX_TOKEN_CHARS} characters")
    if not all("\x21" <= c <= "\x7e" for c in token):
        raise TokenError(f"{where} may hold only printable ASCII characters without spaces "
                         "(it travels in an Authorization header)")


def _period(token: str) -> int:
    """The length of the shortest chunk the token repeats (its own length if none)."""
    n = len(token)
    for p in range(1, n // 2 + 1):
        if all(token[i] == token[i - p] for i in range(p, n)):
            return p
    return n


def symbols(token: str) -> int:
    """How many independent choices the token looks like: each common word, each run of
    RUN_LENGTH+ repeating or stepping characters and each repeated chunk counts as one."""
    text = token[:_period(token)]
    plain = text.lower().translate(_UNSWAP)
    group: list[int | None] = [None] * len(text)
    groups = 0
    for word in COMMON_WORDS:
        at = plain.find(word)
        while at >= 0:
            span = range(at, at + len(word))
            if all(group[k] is None for k in span):
                for k in span:
                    group[k] = groups
                groups += 1
            at = plain.find(word, at + 1)
    i = 0
    while i + 1 < len(text):
        step = ord(text[i + 1]) - ord(text[i])
        j = i + 1
        if step in (-1, 0, 1) and group[i] is None and group[j] is None:
            while j + 1 < len(text) and group[j + 1] is None and ord(text[j + 1]) - ord(text[j]) == step:
                j += 1
            if j - i + 1 >= RUN_LENGTH:
                for k in range(i, j + 1):
                    group[k] = groups
                groups += 1
                i = j + 1
                continue
        i += 1
    return groups + sum(1 for g in group if g is None)


def weakness(token: str) -> str | None:
    """Why the token is too weak for a bind other machines can reach, or None."""
    if len(token) < MIN_LENGTH:
        return f"it is shorter than {MIN_LENGTH} characters"
    if len(set(token)) < MIN_DISTINCT:
        return f"it has fewer than {MIN_DISTINCT} different characters"
    if symbols(token) < MIN_SYMBOLS:
        return "it is made of common words, repeated or consecutive characters, or a repeated chunk"
    return None


def generate_token() -> str:
    """A fresh token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def read_private_file(path: str, where: str, limit: int) -> bytes:
    """The bytes of ``path``, a secret's file; TokenError (one line, naming ``where``) unless the
    file is safe: a regular file, the user's own, no access for group or others, at most
    ``limit`` bytes.

    Anything but a regular file is refused before it is opened (opening some devices does
    something); the file is then opened with O_NONBLOCK (a FIFO swapped in meanwhile cannot hang
    the start) and checked again with fstat on that descriptor, so what is judged is what is read.
    """
    if not path:
        raise TokenError(f"{where}: the file name is empty")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise TokenError(f"{where} {path}: not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise TokenError(f"{where} {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"{where} {path}: not a regular file")
        if st.st_uid != os.geteuid():
            raise TokenError(f"{where} {path}: owned by uid {st.st_uid}, not by the user running "
                             f"gpuflow (uid {os.geteuid()})")
        if st.st_mode & 0o077:
            raise TokenError(f"{where} {path}: other users have access to it (mode "
                             f"{stat.S_IMODE(st.st_mode):04o}); chmod 600 it")
        if st.st_size > limit:
            raise TokenError(f"{where} {path}: larger than {limit} bytes")
        raw = os.read(fd, limit + 1)
    except OSError as exc:
        raise TokenError(f"{where} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise TokenError(f"{where} {path}: larger than {limit} bytes")
    return raw


def read_token_file(path: str, where: str) -> str:
    """The token held in ``path``; TokenError (one line, naming ``where``) unless the file is safe
    (:func:`read_private_file`, at most :data:`MAX_TOKEN_FILE_BYTES`) and the token well formed."""
    raw = read_private_file(path, where, MAX_TOKEN_FILE_BYTES)
    text = raw.decode("ascii", "replace")
    token = text[:-1] if text.endswith("\n") else text
    token = token[:-1] if token.endswith("\r") else token
    check_form(token, f"the token in {where} {path}")
    return token
