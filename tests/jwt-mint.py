#!/usr/bin/env python3
"""Mints a compact JWT for the bearer-token tests, signed with the openssl
command (no Python crypto library needed).

  jwt-mint.py KEY.pem ALG CLAIMS-JSON [KID]  ALG: RS256, ES256, none, or
                                           RS256-badsig (a flipped signature byte);
                                           KID: the header's "kid"
  jwt-mint.py --jwks KID PUBLIC.pem ...    a JWKS of RSA public keys (kid KID, KID-2...)
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


def rsa_jwk(pem, kid):
    """An RSA public key's JWK, its modulus read from openssl's text form."""
    text = subprocess.run(["openssl", "pkey", "-pubin", "-in", pem, "-text", "-noout"],
                          capture_output=True, check=True, text=True).stdout
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("Modulus"))
    hexdigits = ""
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break
        hexdigits += line.strip().replace(":", "")
    n = int(hexdigits, 16)
    e = int(next(l for l in lines if l.startswith("Exponent")).split()[1])
    return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": b64url(n.to_bytes((n.bit_length() + 7) // 8, "big")),
            "e": b64url(e.to_bytes((e.bit_length() + 7) // 8, "big"))}


def main():
    if sys.argv[1] == "--jwks":
        kid = sys.argv[2]
        keys = [rsa_jwk(pem, kid if i == 0 else f"{kid}-{i + 1}")
                for i, pem in enumerate(sys.argv[3:])]
        print(json.dumps({"keys": keys}))
        return
    key, alg, claims = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    now = int(time.time())
    for k, v in claims.items():
        if isinstance(v, str) and v.startswith("now"):
            claims[k] = now + int(v[3:] or 0)
    base_alg = alg.split("-")[0]
    head = {"alg": base_alg, "typ": "JWT"}
    if len(sys.argv) > 4:
        head["kid"] = sys.argv[4]
    header = b64url(json.dumps(head).encode())
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
