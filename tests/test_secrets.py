"""scoctl.secrets: remembered secrets and JWT-shaped text never leave the process in clear."""

from __future__ import annotations

import json
import logging

from scoctl.logs import _RedactingFormatter
from scoctl.secrets import REDACTED, redact, remember, scrub


def test_a_remembered_secret_is_redacted_from_any_text_including_its_json_form():
    secret = 'pw"with\\quotes-7f3a9c'
    remember(secret)
    assert redact(f"auth failed for {secret}!") == f"auth failed for {REDACTED}!"
    assert secret not in redact(json.dumps({"message": f"echo {secret}"}))
    assert json.dumps(secret)[1:-1] not in redact(json.dumps({"message": f"echo {secret}"}))


def test_any_jwt_shaped_text_is_redacted_even_when_never_remembered():
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJvdGhlciJ9.c2lnbmF0dXJlLW9mLXNvbWVvbmUtZWxzZQ"
    assert redact(f"bad token {jwt} here") == f"bad token {REDACTED} here"


def test_short_values_are_not_secrets_and_ordinary_text_is_untouched():
    remember("abc")
    remember(None)
    remember("")
    assert redact("abc and eyJ alone") == "abc and eyJ alone"


def test_scrub_redacts_string_values_as_well_as_secret_keys():
    remember("join-0123456789abcdef")
    detail = {"password": "x", "reason": "node said join-0123456789abcdef",
              "nested": [{"message": "join-0123456789abcdef"}], "count": 3}
    assert scrub(detail) == {"password": REDACTED, "reason": f"node said {REDACTED}",
                             "nested": [{"message": REDACTED}], "count": 3}


def test_the_log_handler_redacts_what_a_caller_forgot_to_scrub():
    remember("s3cr3t-token-value-42")
    record = logging.LogRecord("scoctl", logging.WARNING, __file__, 1,
                               "slurmrestd said %s", ("s3cr3t-token-value-42 is invalid",), None)
    line = _RedactingFormatter("scoctl: %(levelname)s: %(message)s").format(record)
    assert line == f"scoctl: WARNING: slurmrestd said {REDACTED} is invalid"
