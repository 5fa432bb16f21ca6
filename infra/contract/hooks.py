"""Schemathesis hooks for infra/contract/schemathesis.sh.

cargo lambda watch (the local Lambda emulator the writer runs under) answers
500 text/plain by itself, without invoking the function, for requests it
cannot turn into an API Gateway event: a header value that is not ASCII, or
a body with a text content type (application/json) that is not UTF-8. Those
answers, and only those, are not the writer's: such a failure is dropped
(the summary counts it under "Filtered"). The writer's own answers to such
requests (400 invalid_idempotency_key, 400 invalid_json) are tested in
tests/writer_api.rs through lambda_http. Every other failure stands.
"""
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
    return not (emulator and _unconvertible(response.request))
