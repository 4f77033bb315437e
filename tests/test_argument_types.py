"""An argument of the wrong type is a TypeError, one of the right type with
a wrong value a ValueError: `Stdio()`, the OAuth flows' timeouts and
`client_assertion()`. A duration follows `waiting.check_seconds`, the
package's one rule for a number of seconds.

Before, each of these raised ValueError for a wrong type (and `True` was
taken as a lifetime of one second); a `shutdown_timeout` longer than a
thread can wait was taken, and `close()` then raised OverflowError."""

import sys
import threading

import pytest

from mcp_sync import Stdio
from mcp_sync.auth import OAuth
from mcp_sync.auth.jwt import SigningKey, client_assertion

from .helpers import scripted

SECRET = b"0123456789abcdef0123456789abcdef"


def stdio(**options):
    return Stdio(sys.executable, scripted()[1:], **options)


@pytest.mark.parametrize("value", [True, 1.5, "64", None])
def test_a_max_line_bytes_that_is_not_an_int_is_a_type_error(value):
    with pytest.raises(TypeError, match="max_line_bytes must be an integer"):
        stdio(max_line_bytes=value)


@pytest.mark.parametrize("value", [0, -1])
def test_a_max_line_bytes_below_one_is_a_value_error(value):
    with pytest.raises(ValueError, match="max_line_bytes must be a positive integer"):
        stdio(max_line_bytes=value)


@pytest.mark.parametrize("value", [True, "2", None, [2]])
def test_a_shutdown_timeout_that_is_not_a_number_is_a_type_error(value):
    with pytest.raises(TypeError, match="shutdown_timeout must be a number of seconds"):
        stdio(shutdown_timeout=value)


def test_a_shutdown_timeout_given_as_a_string_says_how_to_write_it():
    with pytest.raises(TypeError, match=r"not the string '2': pass shutdown_timeout=2$"):
        stdio(shutdown_timeout="2")


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), threading.TIMEOUT_MAX * 2])
def test_a_shutdown_timeout_out_of_range_is_a_value_error(value):
    with pytest.raises(ValueError, match="shutdown_timeout must be"):
        stdio(shutdown_timeout=value)


def test_a_shutdown_timeout_of_zero_or_a_fraction_is_taken():
    assert stdio(shutdown_timeout=0).shutdown_timeout == 0
    assert stdio(shutdown_timeout=0.25).shutdown_timeout == 0.25


@pytest.mark.parametrize("name", ["timeout", "authorization_timeout"])
@pytest.mark.parametrize("value", [True, "30", None])
def test_an_oauth_timeout_that_is_not_a_number_is_a_type_error(name, value):
    with pytest.raises(TypeError, match=f"^{name} must be a number of seconds"):
        OAuth(**{name: value})


@pytest.mark.parametrize("name", ["timeout", "authorization_timeout"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), threading.TIMEOUT_MAX * 2])
def test_an_oauth_timeout_out_of_range_is_a_value_error(name, value):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        OAuth(**{name: value})


@pytest.mark.parametrize("client_id,audience,says", [
    (None, "https://as", "client_id must be a string"),
    (b"c", "https://as", "client_id must be a string"),
    ("c", None, "audience must be a string"),
    ("c", 7, "audience must be a string"),
])
def test_a_client_assertion_identifier_that_is_not_a_string_is_a_type_error(client_id, audience, says):
    with pytest.raises(TypeError, match=says):
        client_assertion(SigningKey.from_secret(SECRET), client_id, audience)


@pytest.mark.parametrize("value", [True, "60", None])
def test_a_client_assertion_lifetime_that_is_not_a_number_is_a_type_error(value):
    with pytest.raises(TypeError, match="lifetime must be a number of seconds"):
        client_assertion(SigningKey.from_secret(SECRET), "c", "https://as", lifetime=value)


def test_a_long_client_assertion_lifetime_is_no_wait_and_is_taken():
    # Not bounded by what a thread can wait: nothing waits for it.
    assert client_assertion(SigningKey.from_secret(SECRET), "c", "https://as", lifetime=1e12, now=0)
