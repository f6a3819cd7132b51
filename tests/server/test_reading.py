"""When a buffered request is whole (webhook.server.gunicorn.reading.request_complete)."""

import pytest

from webhook.server.gunicorn.reading import HEADER_LIMIT, request_complete

HEAD = b"POST /validate HTTP/1.1\r\nHost: x\r\n"
CASES = [
    ("headers-unfinished", HEAD, 100, (False, None, False)),
    ("body-short", HEAD + b"Content-Length: 5\r\n\r\nabc", 100, (False, len(HEAD) + 21 + 5, False)),
    ("body-whole", HEAD + b"Content-Length: 5\r\n\r\nabcde", 100, (True, len(HEAD) + 21 + 5, False)),
    ("header-case", HEAD + b"content-LENGTH:  3 \r\n\r\nabc", 100, (True, len(HEAD) + 23 + 3, False)),
    ("no-body-get", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 100, (True, 34, False)),
    ("declared-past-limit-now", HEAD + b"Content-Length: 101\r\n\r\n", 100, (True, len(HEAD) + 23, False)),
    ("expect-continue", HEAD + b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n", 100,
     (False, len(HEAD) + 43 + 5, True)),
    ("chunked-open", HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", 100, (False, None, False)),
    ("chunked-whole", HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 100, (True, None, False)),
    ("headers-past-limit", HEAD + b"X: " + b"a" * HEADER_LIMIT, 100, (True, None, False)),
]


@pytest.mark.parametrize("data, max_body, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_request_complete(data: bytes, max_body: int, expected: tuple) -> None:
    assert request_complete(data, max_body) == expected
