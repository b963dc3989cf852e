#!/usr/bin/env python3
"""Writes the hand-made seed corpora of tests/fuzz (doc/fuzzing.md), from
the unit tests' inputs and tests/data. The signed ones (sigv4, awschunked,
volume_walk) come from the project's own writers instead: run a target with
FUZZ_WRITE_SEEDS=DIR. Run from anywhere: python3 tests/fuzz/seeds.py"""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
data_dir = os.path.join(here, "..", "data")


def write(target, seeds):
    d = os.path.join(here, target, "corpus")
    os.makedirs(d, exist_ok=True)
    for i, s in enumerate(seeds):
        with open(os.path.join(d, "seed-%03d" % i), "wb") as f:
            f.write(s if isinstance(s, bytes) else s.encode())


def data(name):
    with open(os.path.join(data_dir, name), "rb") as f:
        return f.read()


write("uri", [
    "Param1=value2&Param1=Value1", "/example space/", "/b/a%2Fb/c", "%zz", "delete",
    "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request",
    "+a+b=c%20d&&e", "\xe1\x88\xb4=bar", "prefix=&delimiter=%2F&list-type=2",
    "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=x", "a%00b",
])

write("rdma_token", [
    "si1 prov=tcp;ofi_rxm addr=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff key=1234 raddr=7f0000001000"
    " len=1048576 flags=w",
    "si1 prov=shm addr=0a0b key=1 raddr=0 len=10 flags=rw",
    "si1 prov=shm addr=0a0b key=ffffffffffffffff raddr=ffffffffffffffff len=18446744073709551615"
    " flags=r",
    "si1 prov=shm addr=0a0b key=1 raddr=0 len=",
    "0a0b0c0d:00000001:00001000:00000010",
    "si2 prov=shm",
])

restore = [
    '<RestoreRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Days>3</Days>'
    '<GlacierJobParameters><Tier>Expedited</Tier></GlacierJobParameters></RestoreRequest>',
    "<RestoreRequest><Days>1</Days><Tier>Bulk</Tier></RestoreRequest>", "",
    "<RestoreRequest><Days>-1</Days></RestoreRequest>", "<Other/>",
]
delete = [
    '<?xml version="1.0"?><Delete><Quiet>true</Quiet><Object><Key>a&amp;b</Key></Object>'
    "<Object><Key>c/d</Key></Object></Delete>",
    "<Delete></Delete>", "<Delete><Object><Key>&#x1;k&#65;</Key><VersionId>1</VersionId>"
    "</Object></Delete>",
    '<!DOCTYPE Delete [<!ENTITY a "aaaa">]><Delete><Object><Key>&a;</Key></Object></Delete>',
]
complete = [
    '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a54357aff0632cce46d942af68356b38"'
    "</ETag></Part><Part><PartNumber>2</PartNumber><ETag>0c78aef83f66abc1fa1e8477f296d394</ETag>"
    "</Part></CompleteMultipartUpload>",
    "<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>x</ETag></Part><Part>"
    "<PartNumber>1</PartNumber><ETag>y</ETag></Part></CompleteMultipartUpload>",
]
listing = [
    '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>'
    "<IsTruncated>true</IsTruncated><Contents><Key>a/1</Key><LastModified>2026-01-02T03:04:05.000Z"
    "</LastModified><ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>12</Size>"
    "<StorageClass>GLACIER</StorageClass></Contents>"
    "<NextContinuationToken>tok/1+=</NextContinuationToken></ListBucketResult>",
    "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
]
initiate = ["<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>VXBsb2Fk"
            "</UploadId></InitiateMultipartUploadResult>"]
write("s3_xml", [b"\0" + s.encode() for s in restore] + [b"\1" + s.encode() for s in delete]
      + [b"\2" + s.encode() for s in complete] + [b"\3" + s.encode() for s in listing]
      + [b"\4" + s.encode() for s in initiate] + [b"\5" + s.encode() for s in delete[:2]])

size = struct.pack("<Q", 1000)
write("s3_headers", [size + s.encode() for s in [
    "bytes=0-9", "bytes=-500", "bytes=900-", "bytes=0-0,5-9", "bytes=1000-", "bytes=18446744073709551615-",
    "Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT", "Wed Oct 21 07:28:00 2015",
    '"d41d8cd98f00b204e9800998ecf8427e", W/"b"', "*", "20130524T000000Z",
]])

positions = data("sample-positions.csv")


def first_lines(text, n):
    return b"".join(text.splitlines(True)[:n])


jsonl = (b'{"bucket":"ds2","key":"j/1","size":10,"volume":"L90001","position":4096,"copy":1}\n'
         b'{"bucket":"ds2","key":"j/2","size":5,"volume":"L90001","position":8192,"copy":2,'
         b'"checksum":"md5:d41d8cd98f00b204e9800998ecf8427e"}\n')
manifest = data("climate-subset.manifest")
known = b"imagenet-2026/train/n00000000/shard-000.tar\nclimate-era5/t2m/\n# c\n\n"
write("catalog_import", [
    b"\0" + first_lines(positions, 25), b"\1" + jsonl, b"\2" + data("sample-ltfs.xml"),
    b"\x0a" + data("sample-ltfs.xml"), b"\x1a" + data("sample-ltfs.xml"),
    b"\3" + first_lines(positions, 8), b"\x0b" + jsonl, b"\4" + known, b"\x0c" + manifest,
])

write("requests_manifest", [manifest, data("imagenet-2026.manifest"), known,
                            "bkt/a\nnoslash\n", "b/k\r\n\n  # x\nb/p/\n"])

write("control_stage", [
    '{"datasets": ["imagenet", "coco"], "job": 1234, "priority": 5, "deadline": 1900000000,'
    ' "pin_lifetime": 3600}',
    '{"files": ["bkt/a", {"path": "bkt/b"}], "manifest": "# m\\nbkt/c\\n", "job": "77_3"}',
    '{"datasets": ["x"], "uid": 1000, "gid": 100, "submission": "node1:4242"}',
    '{"manifest": "bkt/a\\nnoslash\\n"}', '{"datasets": ["x"], "datasets": ["y"]}',
    '{"datasets": ["x"], "priority": 1.5}',
])

write("s3secrets", [
    "# access key, secret, uid, gid\nAKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY 1000 100\n"
    "\nAKIDEXAMPLE secret2 0 0\n",
    "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
    "dup s 1 1\ndup s 2 2\n", "k s 4294967296 1\n",
])

# 'S': header and claims the harness signs; 'J': a JWKS; else a compact token
jwt_claims = ('{"iss": "https://idp.test", "sub": "alice", "aud": "https://s.test",'
              ' "exp": 1800000600, "nbf": 1799999990, "scope": "storage.stage:/data storage.read:/"}')
write("jwt", [
    'S{"alg": "ES256", "typ": "JWT"}\n' + jwt_claims,
    'S{"alg": "ES256", "kid": "1"}\n{"iss": "https://idp.test", "sub": "bob", "aud":'
    ' ["x", "https://wlcg.cern.ch/jwt/v1/any"], "exp": 1800000000.5, "wlcg.groups": ["/cms", "/atlas"]}',
    'S{"alg": "ES256"}\n{"iss": "https://idp.test", "sub": "alice", "aud": "https://s.test",'
    ' "exp": 1799999000, "scope": 7}',
    'S{"alg": "RS256"}\n' + jwt_claims,
    'J{"keys": [{"kty": "EC", "crv": "P-256", "kid": "k", "use": "sig",'
    ' "x": "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY", "y": "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"},'
    ' {"kty": "RSA", "n": "AQAB", "e": "AQAB"}, {"kty": "RSA", "use": "enc", "n": "", "e": ""}]}',
    'J{"keys": [{"kty": "oct", "k": "AAAA"}]}',
    "eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2lkcC50ZXN0In0.",
    "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkcC50ZXN0Iiwic3ViIjoiYWxpY2UifQ.AAAA",
    "a.b.c.d", "....", "e30.e30.",
])

with open(os.path.join(here, "..", "..", "doc", "stagein.conf.example"), "rb") as f:
    example = f.read()
write("conf", [example, b'state_dir = "/var/lib/stagein"\ncache = { capacity = 1099511627776 }\n',
               b'stageind = { port = 9100; bind = "127.0.0.1" }\n', b'state_dir = ""\n',
               b'library = { faults = ( { drive = 1 } ) }\n'])

# pax and ustar blocks from a volume the project's writer made (volume_walk's
# seed-1, one archive file): its pax header block, the pax records and the
# member's ustar header.
with open(os.path.join(here, "volume_walk", "corpus", "seed-1"), "rb") as f:
    volume = f.read()
stream = 1024
pax_header, pax_data, ustar = (volume[stream + i * 512:stream + (i + 1) * 512] for i in range(3))
write("tar", [pax_header, pax_data.rstrip(b"\0"), ustar, pax_header + pax_data])
