"""Schemathesis hooks for infra/contract/schemathesis.sh.

Two kinds of failure are dropped here, each for a stated reason; every
other failure stands.

1. The local emulator's own 500s (below).
2. A schema-valid request refused by one of the two sums the document
   states in prose because JSON Schema cannot: a line total (quantity ×
   unitPriceCents) or the order total above 9007199254740991. Only a
   `400 invalid_field` whose `field` is `items[N]` or `totalCents` (the
   writer's answer for exactly those rules, tested in
   tests/writer_api/errors.rs) is dropped; a 400 on any single field of a
   valid request still fails.

cargo lambda watch (the local Lambda emulator the writer runs under) answers
500 text/plain by itself, without invoking the function, for requests it
cannot turn into an API Gateway event: a header value that is not ASCII, or
a body with a text content type (application/json) that is not UTF-8. Those
answers, and only those, are not the writer's: such a failure is dropped
(the summary counts it under "Filtered"). The writer's own answers to such
requests (400 invalid_idempotency_key, 400 invalid_json) are tested in
tests/writer_api/errors.rs through lambda_http. Every other failure stands.
"""
import json
import re

import schemathesis

EMULATOR_500 = b"https://httpstatuses.com/500"


def _unconvertible(request):
    headers_ok = all(
        (value.encode("latin-1") if isinstance(value, str) else value).isascii()
        for value in request.headers.values()
    )
    body = request.body
    if isinstance(body, str):
        body = body.encode("latin-1", "replace")
    try:
        (body or b"").decode("utf-8")
        body_ok = True
    except UnicodeDecodeError:
        body_ok = False
    return not (headers_ok and body_ok)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    emulator = (
        response.status_code == 500
        and response.headers.get("content-type", [""])[0].startswith("text/plain")
        and EMULATOR_500 in response.content
    )
    return not (emulator and _unconvertible(response.request)) and not _a_documented_sum(failure, response)


SUM_FIELD = re.compile(r"^(items\[\d+\]|totalCents)$")


def _a_documented_sum(failure, response):
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return False
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return error.get("code") == "invalid_field" and bool(SUM_FIELD.match(error.get("field", "")))
