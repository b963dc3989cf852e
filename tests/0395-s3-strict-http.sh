#!/bin/bash
# Strict HTTP framing (issue 16, finding 5), raw (tests/s3raw.py) and with
# boto3 and curl: two different Content-Length headers are refused 400 (S3
# and the control API); a query of over a hundred parameters gets an S3
# error, not a closed connection; a ?delete body over 1 MiB gets
# MaxMessageLengthExceeded; a control-API push whose key holds %00 is
# refused, not stored under the key cut at the NUL. None changes anything.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

s3_setup A
s3_start_ok "stageind starts with its S3 port"
# wait_archived: an accepted PUT on tape, before rows are compared
wait_archived() {
    local _
    for _ in $(seq 100); do
        [ "$(sql "SELECT count(*) FROM push_items WHERE state <> 'DURABLE'")" = 0 ] && return
        sleep 0.1
    done
}
is "$(s3raw request PUT /upl/control --data control)" "200 -" "control: a well-signed PUT is stored"
wait_archived

# refused DESCRIPTION "STATUS CODE" -- s3raw ARGS...: that answer, and no change
refused() {
    local desc=$1 want=$2; shift 3
    local before after
    before=$(s3_state_rows)
    is "$(s3raw "$@" 2>/dev/null)" "$want" "$desc"
    after=$(s3_state_rows)
    is "$after" "$before" "... and nothing changed"
}

# ---- two Content-Length headers
refused "PUT with Content-Length 5 and Content-Length 1: 400" "400 InvalidRequest" -- \
    request PUT /upl/dup --data hello --raw-header "Content-Length: 1"
is "$(s3raw request HEAD /upl/dup)" "404 -" "no object dup was stored"
is "$(s3raw request PUT /upl/same --data hello --raw-header "Content-Length: 5")" "200 -" \
    "two equal Content-Length headers: one length, accepted"
wait_archived

# ---- many query parameters
q=$(python3 -c 'print("&".join("p%d=%d" % (i, i) for i in range(1200)))')
refused "GET with 1200 query parameters: 400 InvalidArgument (an answer, not a close)" \
    "400 InvalidArgument" -- request GET /upl --query "$q"
q=$(python3 -c 'print("&".join("x" for i in range(5000)))')
refused "GET with 5000 empty query parameters: 400 InvalidArgument" "400 InvalidArgument" -- \
    request GET /upl --query "$q"
is "$(s3raw request GET /upl --query "list-type=2&prefix=c&max-keys=5")" "200 -" \
    "a list with three parameters is still served"

# ---- oversized ?delete bodies
python3 -c 'import sys; sys.stdout.write("<Delete>" + "".join("<Object><Key>k%07d</Key></Object>" % i for i in range(60000)) + "</Delete>")' > "$OUT/del2m.xml"
refused "POST ?delete with a 2 MB body: 400 MaxMessageLengthExceeded" "400 MaxMessageLengthExceeded" -- \
    request POST /upl --query delete= --body-file "$OUT/del2m.xml"
head -c 20000000 /dev/zero > "$OUT/del20m.xml"
got=$(s3raw request POST /upl --query delete= --body-file "$OUT/del20m.xml" 2>/dev/null)
case $got in
    "400 MaxMessageLengthExceeded"|closed) ok 0 "POST ?delete declaring 20 MB: refused at its headers ($got)" ;;
    *) ok 1 "POST ?delete declaring 20 MB: refused at its headers"; diag "got: $got" ;;
esac
is "$(s3raw request HEAD /upl/control)" "200 -" "the server still answers after it"
results=$(boto3_run '
keys = [{"Key": "k" * 200 + "%06d" % i} for i in range(6000)]
try:
    s3.delete_objects(Bucket="upl", Delete={"Objects": keys})
    print("not ok\tdelete_objects with a 1.3 MB body: refused\tno error")
except ClientError as e:
    print(("ok\t%s" if code_of(e) == "MaxMessageLengthExceeded 400" else "not ok\t%s\t" + code_of(e))
          % "delete_objects with a 1.3 MB body: MaxMessageLengthExceeded 400")
print("done")
' 2>&1)
boto3_tap "$results"

# ---- control-API push: a key holding a NUL byte
printf 'nul' > "$OUT/nul"
push() {  # push QUERY FILE: the status code, the body in $BODY
    curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
        -H 'Content-Type: application/octet-stream' --data-binary "@$2" \
        "http://127.0.0.1:$PORT/api/v1/push?$1"
}
before=$(s3_state_rows)
is "$(push "dataset=nuls&key=a%00b" "$OUT/nul")" 400 "push key=a%00b: 400"
grep -q "NUL" "$BODY" && ok 0 "... the error names the NUL byte" || { ok 1 "... the error names the NUL byte"; diag "$(cat "$BODY")"; }
is "$(s3_state_rows)" "$before" "... and nothing was stored (no object 'a')"
is "$(push "dataset=nu%00ls&key=c" "$OUT/nul")" 400 "push dataset=nu%00ls: 400"
is "$(curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
    -H 'Content-Length: 3' -H 'Content-Length: 1' --data-binary "@$OUT/nul" \
    "http://127.0.0.1:$PORT/api/v1/push?dataset=nuls&key=d" 2>/dev/null)" 400 \
    "control API: two different Content-Length headers: 400"
is "$(s3_state_rows)" "$before" "... nothing was stored"
is "$(push "dataset=nuls&key=a" "$OUT/nul")" 202 "control: push key=a is accepted"
is "$(s3raw request PUT /upl/a%00b --data x)" "400 InvalidArgument" "S3 PUT of key a%00b: refused alike"
finish
