"""The token rules (gpuflow.transport.tokens) and the rule for a bind other machines can reach
(gpuflow.transport.preflight), as functions: what is too weak, what is malformed, which
addresses count as local, and the random tokens the usual generators make all passing.
"""

from __future__ import annotations

import base64
import os
import secrets
import uuid

import pytest

from gpuflow.transport.preflight import exposure_error, exposure_warnings, is_local_address
from gpuflow.transport.settings import AppSettings
from gpuflow.transport.tokens import TokenError, check_form, generate_token, symbols, weakness

WEAK = {
    "a": "shorter", "secret": "shorter", "0123456789abcde": "shorter",
    "aaaaaaaaaaaaaaaaaaaa": "different", "abababababababababab": "different",
    "aB3$aB3$aB3$aB3$": "different",
    "0123456789abcdef": "common words", "password12345678": "common words",
    "P@ssw0rd!P@ssw0rd!": "common words", "gpuflowgpuflowgpuflow": "common words",
    "Summer2024!Summer2024!": "common words", "qwertyuiopasdfgh": "common words",
    "abcdefghijklmnopqrstuvwxyz": "common words", "hardening-" + "k" * 40: "common words",
    "s3cret-token-value": "common words",
}
STRONG = ["Zq7-Lp2_xK9vW4tYb8NcE3uR", "correcthorsebatterystaple", "embedded-token-123"]


@pytest.mark.parametrize("token,why", WEAK.items())
def test_weak_tokens_and_why(token, why):
    assert why in weakness(token)


@pytest.mark.parametrize("token", STRONG)
def test_strong_tokens(token):
    assert weakness(token) is None


@pytest.mark.parametrize("make", [lambda: secrets.token_hex(16), lambda: secrets.token_urlsafe(16),
                                  lambda: secrets.token_urlsafe(32), lambda: str(uuid.uuid4()),
                                  lambda: base64.b64encode(os.urandom(12)).decode(), generate_token],
                         ids=["hex32", "urlsafe16", "urlsafe32", "uuid4", "base64-12", "generated"])
def test_random_tokens_of_the_usual_generators_pass(make):
    assert not [t for t in (make() for _ in range(3000)) if weakness(t) is not None]


def test_symbols_count_words_runs_and_repeats_once():
    assert symbols("password") == 1 and symbols("abcdef") == 1 and symbols("zzzz") == 1
    assert symbols("xQ7" * 6) == 3
    assert symbols("Zq7-Lp2_xK9vW4tYb8NcE3uR") == 24


@pytest.mark.parametrize("token,why", [("", "must not be empty"), ("two words", "printable ASCII"),
                                       ("tab\there", "printable ASCII"), ("é" * 20, "printable ASCII"),
                                       ("nul\x00x", "printable ASCII"), ("x" * 1025, "longer than 1024")])
def test_malformed_tokens(token, why):
    with pytest.raises(TokenError, match=why) as exc:
        check_form(token, "the token")
    assert not token or token not in str(exc.value)


def test_the_generated_token_is_long_url_safe_and_fresh():
    a, b = generate_token(), generate_token()
    assert len(a) == 43 and a != b and set(a) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize("address,local", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("::ffff:127.0.0.1", True), ("unix:/run/gpuflow.sock", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("192.0.2.2", False),
    ("fe80::1%eth0", False), ("gpu-node", False)])
def test_which_addresses_are_local(address, local):
    assert is_local_address(address) is local


def test_exposure_rule():
    none, strong = AppSettings(), AppSettings(token=STRONG[0])
    assert exposure_error(["127.0.0.1", "unix:/x"], none, "T", "O") is None
    why = exposure_error(["127.0.0.1", "0.0.0.0"], none, "GPUFLOW_TOKEN", "set X=1")
    assert "0.0.0.0 is reachable" in why and "GPUFLOW_TOKEN" in why and "set X=1" in why
    assert "127.0.0.1" not in why
    assert exposure_error(["0.0.0.0"], strong, "T", "O") is None
    assert "too weak" in exposure_error(["0.0.0.0"], AppSettings(token="password"), "T", "O")
    assert exposure_error(["0.0.0.0"], AppSettings(insecure_no_auth=True), "T", "O") is None


def test_exposure_warnings():
    assert "WITHOUT AUTHENTICATION" in exposure_warnings(["::"], AppSettings(insecure_no_auth=True))[0]
    assert "weak" in exposure_warnings(["127.0.0.1"], AppSettings(token="password"))[0]
    assert exposure_warnings(["127.0.0.1"], AppSettings(token=STRONG[0])) == []
    assert exposure_warnings(["0.0.0.0"], AppSettings(token=STRONG[0])) == []
