#!/usr/bin/python3
"""An HTTP proxy on loopback that injects faults between an S3 client and its
server, for the archive backend's fault tests.

    faultproxy.py --listen PORT --upstream HOST:PORT --rules FILE --log FILE

Requests are forwarded unchanged (so SigV4 signatures stay valid: the client
signed the Host it sent). Before each request the rules file is read again,
so a test changes the faults between steps. One rule per line:

    METHOD PATH_REGEX QUERY_REGEX COUNT ACTION [ARG...]

METHOD is GET, HEAD, PUT, POST, DELETE or *; the regexes are Python `re`
searches of the path and the raw query ("-" matches anything); COUNT is how
many requests the rule applies to ("*": all). The first matching rule with
uses left applies; its uses are counted in memory (by line text). Actions:

    status CODE S3CODE      answer CODE with an S3 XML error, upstream untouched
    delay SECONDS           wait, then forward
    drop                    read the request, close without answering
    truncate BYTES          forward; send the answer's headers and BYTES of its body, close
    corrupt                 forward; flip one byte in the middle of the body
    header NAME VALUE...    forward; set header NAME to VALUE (VALUE "" removes it)

The log file gets one line per request: "METHOD PATH?QUERY -> STATUS ACTION"
(a delayed request gets a "held delay" line when the delay begins).
"""
import argparse
import re
import socket
import socketserver
import sys
import threading
import time

LOCK = threading.Lock()
USED = {}


def read_rules(path):
    rules = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split()
                if len(parts) < 5:
                    continue
                rules.append((line, parts))
    except FileNotFoundError:
        pass
    return rules


def pick(rules_path, method, path, query):
    with LOCK:
        for line, p in read_rules(rules_path):
            m, pre, qre, count, action = p[:5]
            if m != "*" and m != method:
                continue
            if pre != "-" and not re.search(pre, path):
                continue
            if qre != "-" and not re.search(qre, query):
                continue
            used = USED.get(line, 0)
            if count != "*" and used >= int(count):
                continue
            USED[line] = used + 1
            return action, p[5:]
    return None, []


def read_head(sock, buf):
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return None, buf
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def header_value(lines, name):
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip()
    return None


def s3_error(code, s3code):
    body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
            "<Message>injected by faultproxy</Message></Error>" % s3code).encode()
    reason = {500: "Internal Server Error", 503: "Service Unavailable"}.get(code, "Error")
    return (("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n"
             % (code, reason, len(body))).encode() + body)


def forward(upstream, head_lines, body):
    """Sends the request with Connection: close; returns the whole answer."""
    lines = [l for l in head_lines if not l.lower().startswith(b"connection:")]
    lines.append(b"Connection: close")
    up = socket.create_connection(upstream, timeout=120)
    try:
        up.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        chunks = []
        while True:
            data = up.recv(1 << 20)
            if not data:
                break
            chunks.append(data)
    finally:
        up.close()
    return b"".join(chunks)


def split_answer(answer):
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        buf = b""
        while True:
            head, buf = read_head(sock, buf)
            if head is None:
                return
            lines = head.split(b"\r\n")
            method, target = lines[0].split(b" ")[:2]
            method, target = method.decode(), target.decode()
            path, _, query = target.partition("?")
            length = int(header_value(lines, b"content-length") or 0)
            while len(buf) < length:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            body, buf = buf[:length], buf[length:]
            action, args = pick(self.server.rules, method, path, query)
            status = "-"
            if action == "status":
                out = s3_error(int(args[0]), args[1] if len(args) > 1 else "InternalError")
                status = args[0]
            elif action == "drop":
                self.log(method, target, "closed", action)
                sock.close()
                return
            else:
                if action == "delay":
                    self.log(method, target, "held", "delay")  # logged now: the client may go
                    time.sleep(float(args[0]))
                    action = "delayed"
                try:
                    out = forward(self.server.upstream, lines, body)
                except OSError as e:
                    self.log(method, target, "upstream-error", str(e))
                    return
                alines, abody = split_answer(out)
                status = alines[0].split(b" ")[1].decode() if len(alines[0].split(b" ")) > 1 else "?"
                if action == "truncate":
                    keep = int(args[0])
                    sock.sendall(b"\r\n".join(alines) + b"\r\n\r\n" + abody[:keep])
                    self.log(method, target, status, "truncate")
                    sock.close()
                    return
                if action == "corrupt" and abody:
                    i = len(abody) // 2
                    abody = abody[:i] + bytes([abody[i] ^ 0x5A]) + abody[i + 1:]
                if action == "header":
                    name = args[0].encode()
                    value = " ".join(args[1:])
                    value = b"" if value in ('""', "") else value.encode()
                    alines = [l for l in alines
                              if not l.lower().startswith(name.lower() + b":")]
                    if value:
                        alines.append(name + b": " + value)
                # keep-alive towards the client: drop the upstream's Connection: close
                alines = [l for l in alines if not l.lower().startswith(b"connection:")]
                out = b"\r\n".join(alines) + b"\r\n\r\n" + abody
            self.log(method, target, status, action or "pass")
            try:
                sock.sendall(out)
            except OSError:
                return

    def log(self, method, target, status, action):
        with LOCK:
            with open(self.server.log_path, "a") as f:
                f.write("%s %s -> %s %s\n" % (method, target, status, action))


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    host, port = a.upstream.rsplit(":", 1)
    srv = Server(("127.0.0.1", a.listen), Handler)
    srv.upstream = (host, int(port))
    srv.rules = a.rules
    srv.log_path = a.log
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
