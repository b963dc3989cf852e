#!/usr/bin/env python3
"""Mints a compact JWT for the bearer-token tests, signed with the openssl
command (no Python crypto library needed).

  jwt-mint.py KEY.pem ALG CLAIMS-JSON      ALG: RS256, ES256, none, or
                                           RS256-badsig (a flipped signature byte)
A claim value "now+N" / "now-N" becomes unix time now +/- N seconds."""
import base64
import json
import subprocess
import sys
import time


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_to_raw(der):
    """ECDSA DER (SEQUENCE of two INTEGERs) -> r || s, 32 bytes each."""
    def integer(at):
        assert der[at] == 2
        n = der[at + 1]
        return int.from_bytes(der[at + 2:at + 2 + n], "big"), at + 2 + n
    at = 2 if der[1] < 0x80 else 3
    r, at = integer(at)
    s, _ = integer(at)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def main():
    key, alg, claims = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    now = int(time.time())
    for k, v in claims.items():
        if isinstance(v, str) and v.startswith("now"):
            claims[k] = now + int(v[3:] or 0)
    base_alg = alg.split("-")[0]
    header = b64url(json.dumps({"alg": base_alg, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing = f"{header}.{payload}".encode()
    sig = b""
    if base_alg != "none":
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing,
                             capture_output=True, check=True).stdout
        if base_alg == "ES256":
            sig = der_to_raw(sig)
        if alg.endswith("badsig"):
            sig = sig[:-1] + bytes([sig[-1] ^ 1])
    print(f"{header}.{payload}.{b64url(sig)}")


main()
