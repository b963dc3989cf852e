#!/usr/bin/python3
"""Raw S3 requests for the system tests: signed with botocore's SigV4 code
(header or presigned query), then written to a plain socket so that the
request can be malformed on purpose (wrong secret or region, no x-amz-date,
a skewed clock, a Content-Length that does not match the body, oversized
headers, a client that trickles its bytes).

    s3raw.py --endpoint HOST:PORT --key K --secret S request METHOD PATH [options]
        prints "STATUS CODE" (CODE: the <Code> of an S3 XML error, or "-"),
        "closed" when the server closed the connection without an answer
    s3raw.py ... presign METHOD PATH [--expires N] [--date-offset S]   prints a URL
    s3raw.py ... slowput PATH --length N [--interval S] [--limit S]
        a PUT declaring N bytes, its body one byte every S seconds
    s3raw.py ... trickle PATH [--interval S] [--limit S]
        sends a request one byte every S seconds; prints how many seconds
        passed until the server closed the connection, or "open" after --limit

PATH is sent exactly as given (already percent-encoded), and signed as such.
"""
import argparse
import datetime
import hashlib
import re
import socket
import sys
import time
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.credentials


class _ShiftedClock:
    """Stands in for the datetime module inside botocore.auth so that a
    request can be signed at another time (skewed clock, expired presign)."""

    def __init__(self, offset_s):
        self._offset = datetime.timedelta(seconds=offset_s)
        self.timedelta = datetime.timedelta
        real = datetime.datetime
        offset = self._offset

        class _Datetime(real):
            @classmethod
            def utcnow(cls):
                return real.utcnow() + offset

        self.datetime = _Datetime


def _sign(args, method, path, query, headers, body, presign_expires=None):
    """Returns (path?query, headers) with the signature, using botocore."""
    url = "http://%s%s" % (args.endpoint, path)
    if query:
        url += "?" + query
    request = botocore.awsrequest.AWSRequest(method=method, url=url, headers=dict(headers),
                                             data=body)
    credentials = botocore.credentials.Credentials(args.key, args.secret)
    if args.date_offset:
        botocore.auth.datetime = _ShiftedClock(args.date_offset)
    if presign_expires is not None:
        signer = botocore.auth.S3SigV4QueryAuth(credentials, "s3", args.region,
                                                expires=presign_expires)
    else:
        signer = botocore.auth.S3SigV4Auth(credentials, "s3", args.region)
        if args.payload_hash:  # e.g. UNSIGNED-PAYLOAD, or a hash of other bytes
            signer.payload = lambda _request: args.payload_hash
    signer.add_auth(request)
    split = urllib.parse.urlsplit(request.url)
    target = split.path + ("?" + split.query if split.query else "")
    return target, list(request.headers.items())


def _read_answer(sock, timeout, head_only=False):
    """Reads one HTTP response (or until close). Returns (status, headers, body)
    or (None, None, b"") when the server closed without answering. head_only:
    the answer to a HEAD has no body whatever its Content-Length says."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, OSError):
            chunk = b""
        if not chunk or time.monotonic() > deadline:
            break
        data += chunk
    if b"\r\n\r\n" not in data:
        return None, None, b""
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if head_only or status in (204, 304) or 100 <= status < 200:
        length = "0"
    chunked = "chunked" in headers.get("transfer-encoding", "")
    while True:
        if length is not None and len(body) >= int(length):
            body = body[: int(length)]
            break
        if chunked and body.endswith(b"0\r\n\r\n"):
            body = _dechunk(body)
            break
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, OSError):
            break
        if not chunk:
            break
        body += chunk
    return status, headers, body


def _dechunk(data):
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return out


def _error_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body or b"")
    return m.group(1).decode() if m else "-"


def _body_arg(args):
    if args.body_file:
        with open(args.body_file, "rb") as f:
            return f.read()
    if args.data is not None:
        return args.data.encode()
    return b""


def cmd_request(args):
    body = _body_arg(args)
    headers = [tuple(h.split(":", 1)) for h in args.header]
    headers = [(n.strip(), v.strip()) for n, v in headers]
    if args.sign == "header":
        target, headers = _sign(args, args.method, args.path, args.query, headers, body)
    elif args.sign == "presign":
        target, headers = _sign(args, args.method, args.path, args.query, headers, b"",
                                presign_expires=args.expires)
        headers = [(n, v) for n, v in headers if n.lower() != "x-amz-content-sha256"]
    else:
        target = args.path + ("?" + args.query if args.query else "")
    headers = [(n, v) for n, v in headers if n.lower() not in ("content-length", "host")]
    if args.no_date:
        headers = [(n, v) for n, v in headers if n.lower() != "x-amz-date"]
    if args.bad_signature:
        headers = [(n, re.sub(r"Signature=([0-9a-f])", lambda m: "Signature=" +
                              ("0" if m.group(1) != "0" else "1"), v))
                   if n.lower() == "authorization" else (n, v) for n, v in headers]
        target = re.sub(r"X-Amz-Signature=([0-9a-f])",
                        lambda m: "X-Amz-Signature=" + ("0" if m.group(1) != "0" else "1"),
                        target)
    if args.send_body_file:  # the bytes actually sent, when they differ from the signed ones
        with open(args.send_body_file, "rb") as f:
            body = f.read()
    length = args.content_length if args.content_length is not None else len(body)
    lines = ["%s %s HTTP/1.1" % (args.method, target), "Host: %s" % args.endpoint]
    lines += ["%s: %s" % (n, v) for n, v in headers]
    if body or args.method in ("PUT", "POST") or args.content_length is not None:
        lines.append("Content-Length: %d" % length)
    lines += args.raw_header  # unsigned, unfiltered: duplicates on purpose
    lines.append("Connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    host, port = args.endpoint.rsplit(":", 1)
    try:
        sock = socket.create_connection((host, int(port)), timeout=args.timeout)
    except OSError as e:
        print("no connection (%s)" % e.strerror)
        return 0
    try:
        sock.sendall(raw)
        if args.close_write:
            sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    status, resp_headers, resp_body = _read_answer(sock, args.timeout, args.method == "HEAD")
    sock.close()
    if status is None:
        print("closed")
        return 0
    if args.out:
        with open(args.out, "wb") as f:
            f.write(resp_body)
    if args.show_header:
        for name in args.show_header:
            print("%s: %s" % (name, resp_headers.get(name.lower(), "")), file=sys.stderr)
    print(status, _error_code(resp_body) if status >= 300 else "-")
    return 0


def cmd_presign(args):
    target, _ = _sign(args, args.method, args.path, args.query, [], b"",
                      presign_expires=args.expires)
    print("http://%s%s" % (args.endpoint, target))
    return 0


def cmd_trickle(args):
    target, headers = _sign(args, "GET", args.path, "", [], b"")
    lines = ["GET %s HTTP/1.1" % target, "Host: %s" % args.endpoint]
    lines += ["%s: %s" % (n, v) for n, v in headers if n.lower() != "host"]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode()
    host, port = args.endpoint.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.settimeout(args.interval)
    start = time.monotonic()
    for byte in raw:
        if time.monotonic() - start > args.limit:
            print("open")
            return 0
        try:
            sock.sendall(bytes([byte]))
            sock.recv(4096)  # waits one interval; an answer or a close ends the trickle
            print("%.1f" % (time.monotonic() - start))
            return 0
        except socket.timeout:
            continue
        except OSError:
            print("%.1f" % (time.monotonic() - start))
            return 0
    print("complete")  # the whole request went through before the server gave up
    return 0


def cmd_slowput(args):
    """A PUT declaring --length bytes whose body then comes one byte every
    --interval seconds: prints "cut S" when the server closed the connection
    (S seconds after the headers), "answered STATUS CODE S" when it answered,
    "open" after --limit."""
    args.payload_hash = "UNSIGNED-PAYLOAD"
    target, headers = _sign(args, "PUT", args.path, "", [], b"")
    lines = ["PUT %s HTTP/1.1" % target, "Host: %s" % args.endpoint]
    lines += ["%s: %s" % (n, v) for n, v in headers if n.lower() not in ("host", "content-length")]
    lines.append("Content-Length: %d" % args.length)
    host, port = args.endpoint.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    sock.settimeout(args.interval)
    start = time.monotonic()
    sys.stdout.write("started\n")
    sys.stdout.flush()
    while time.monotonic() - start < args.limit:
        try:
            sock.sendall(b"x")
            data = sock.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            data = b""
        elapsed = time.monotonic() - start
        if not data:
            print("cut %.1f" % elapsed)
        else:
            m = re.match(rb"HTTP/1.1 (\d+)", data)
            print("answered %s %s %.1f" % (m.group(1).decode() if m else "?", _error_code(data),
                                           elapsed))
        return 0
    print("open")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", required=True, help="HOST:PORT")
    p.add_argument("--key", required=True)
    p.add_argument("--secret", required=True)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--date-offset", type=int, default=0,
                   help="sign as if the clock were this many seconds ahead")
    p.add_argument("--payload-hash", help="x-amz-content-sha256 to sign instead of the body's")
    p.add_argument("--timeout", type=float, default=10)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("request")
    r.add_argument("method")
    r.add_argument("path")
    r.add_argument("--query", default="")
    r.add_argument("-H", "--header", action="append", default=[])
    r.add_argument("--body-file")
    r.add_argument("--data")
    r.add_argument("--send-body-file", help="send these bytes instead of the signed body")
    r.add_argument("--content-length", type=int)
    r.add_argument("--raw-header", action="append", default=[],
                   help="a header line sent as given, after signing (e.g. a second Content-Length)")
    r.add_argument("--close-write", action="store_true", help="half-close after sending")
    r.add_argument("--sign", choices=("header", "presign", "none"), default="header")
    r.add_argument("--expires", type=int, default=300)
    r.add_argument("--no-date", action="store_true", help="drop x-amz-date after signing")
    r.add_argument("--bad-signature", action="store_true", help="change one signature digit")
    r.add_argument("--out", help="write the response body here")
    r.add_argument("--show-header", action="append", help="print this response header to stderr")
    r.set_defaults(func=cmd_request)

    s = sub.add_parser("presign")
    s.add_argument("method")
    s.add_argument("path")
    s.add_argument("--query", default="")
    s.add_argument("--expires", type=int, default=300)
    s.set_defaults(func=cmd_presign)

    t = sub.add_parser("trickle")
    t.add_argument("path")
    t.add_argument("--interval", type=float, default=0.5)
    t.add_argument("--limit", type=float, default=30)
    t.set_defaults(func=cmd_trickle)

    w = sub.add_parser("slowput")
    w.add_argument("path")
    w.add_argument("--length", type=int, required=True, help="the Content-Length declared")
    w.add_argument("--interval", type=float, default=0.5)
    w.add_argument("--limit", type=float, default=30)
    w.set_defaults(func=cmd_slowput)

    args = p.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
