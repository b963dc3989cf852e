#!/bin/bash
# Who may touch whose buckets (issue 16, findings 1 and 2), with two users,
# alice and bob, through boto3 and awscli: every bucket-level write to a
# bucket made by CreateBucket is its owner's (root excepted): CreateBucket
# again, DeleteBucket, PutObject, CopyObject into it, CreateMultipartUpload,
# DeleteObject and DeleteObjects; configured archive buckets are shared:
# everyone writes, each object stays its writer's (read, replace, delete),
# also once archived to tape, and s3.archive_bucket_mode opens reading to
# others without opening deleting.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3 aws

KEY_ALICE=STAGEINS3ALICE000001
SECRET_ALICE=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
KEY_BOB=STAGEINS3BOB00000001
SECRET_BOB=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
s3_setup A
printf '%s %s 1001 1001\n%s %s 1002 1002\n' "$KEY_ALICE" "$SECRET_ALICE" \
    "$KEY_BOB" "$SECRET_BOB" >> "$S3_SECRETS"
s3_start_ok "stageind starts with its S3 port"

# users_checks SCRIPT: boto3 with clients root, alice, bob; check(cond,
# desc, detail) and expect_error(desc, "Code status", fn) print TAP lines
users_checks() {
    local results
    results=$(KEY_ALICE=$KEY_ALICE SECRET_ALICE=$SECRET_ALICE KEY_BOB=$KEY_BOB \
        SECRET_BOB=$SECRET_BOB boto3_run '
def client(k, s):
    return boto3.client("s3", endpoint_url=os.environ["S3_URL"], aws_access_key_id=k,
                        aws_secret_access_key=s, region_name=os.environ["S3_REGION"],
                        config=botocore.config.Config(s3={"addressing_style": "path"},
                                                      signature_version="s3v4",
                                                      retries={"max_attempts": 1}))
root = s3
alice = client(os.environ["KEY_ALICE"], os.environ["SECRET_ALICE"])
bob = client(os.environ["KEY_BOB"], os.environ["SECRET_BOB"])
'"$BOTO3_CHECKS"'
def keys(c, b):
    return sorted(o["Key"] for o in c.list_objects_v2(Bucket=b).get("Contents", []))
'"$1"'
print("done")
' 2>&1)
    boto3_tap "$results"
}

# ---- 1: a bucket made by CreateBucket is its owner's
users_checks '
check(attempt("alice creates abkt", lambda: alice.create_bucket(Bucket="abkt")) is not None,
      "alice creates bucket abkt")
expect_error("bob creates abkt: BucketAlreadyExists", "BucketAlreadyExists 409",
    lambda: bob.create_bucket(Bucket="abkt"))
expect_error("alice creates abkt again: BucketAlreadyOwnedByYou", "BucketAlreadyOwnedByYou 409",
    lambda: alice.create_bucket(Bucket="abkt"))
expect_error("bob deletes the empty abkt: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_bucket(Bucket="abkt"))
expect_error("bob puts into abkt: AccessDenied", "AccessDenied 403",
    lambda: bob.put_object(Bucket="abkt", Key="b", Body=b"bob"))
expect_error("bob starts a multipart upload in abkt: AccessDenied", "AccessDenied 403",
    lambda: bob.create_multipart_upload(Bucket="abkt", Key="m"))
attempt("alice puts abkt/a", lambda: alice.put_object(Bucket="abkt", Key="a", Body=b"alice"))
expect_error("bob copies abkt/a into abkt: AccessDenied", "AccessDenied 403",
    lambda: bob.copy_object(Bucket="abkt", Key="c", CopySource={"Bucket": "abkt", "Key": "a"}))
expect_error("bob deletes abkt/a: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_object(Bucket="abkt", Key="a"))
expect_error("bob delete_objects abkt/a: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_objects(Bucket="abkt", Delete={"Objects": [{"Key": "a"}]}))
check(attempt("head_bucket", lambda: alice.head_bucket(Bucket="abkt")) is not None,
      "abkt is still there for alice")
body = attempt("alice get", lambda: alice.get_object(Bucket="abkt", Key="a")["Body"].read())
check(body == b"alice", "abkt/a is intact", body)
check(attempt("alice put", lambda: alice.put_object(Bucket="abkt", Key="a2", Body=b"more")) is not None,
      "alice still writes into abkt")
expect_error("bob deletes non-empty abkt: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_bucket(Bucket="abkt"))
attempt("alice creates abkt2", lambda: alice.create_bucket(Bucket="abkt2"))
check(attempt("root deletes abkt2", lambda: root.delete_bucket(Bucket="abkt2")) is not None,
      "root deletes alice'"'"'s empty abkt2 (admin)")
attempt("alice creates abkt3", lambda: alice.create_bucket(Bucket="abkt3"))
check(attempt("alice deletes abkt3", lambda: alice.delete_bucket(Bucket="abkt3")) is not None,
      "alice deletes her own empty abkt3")
check(attempt("bob creates abkt3", lambda: bob.create_bucket(Bucket="abkt3")) is not None,
      "bob creates abkt3 once alice deleted it: now his")
'

# ---- 2: a configured archive bucket is shared; each object stays its writer's
users_checks '
attempt("alice puts", lambda: alice.put_object(Bucket="arch", Key="alice/ckpt", Body=b"A" * 5000))
check(attempt("bob puts", lambda: bob.put_object(Bucket="arch", Key="bob/ckpt", Body=b"B" * 5000)) is not None,
      "bob writes into arch after alice (not refused)")
check(keys(alice, "arch") == ["alice/ckpt"], "alice lists only her object", keys(alice, "arch"))
check(keys(bob, "arch") == ["bob/ckpt"], "bob lists only his object", keys(bob, "arch"))
check(keys(root, "arch") == ["alice/ckpt", "bob/ckpt"], "root lists both", keys(root, "arch"))
expect_error("bob reads alice/ckpt: AccessDenied", "AccessDenied 403",
    lambda: bob.get_object(Bucket="arch", Key="alice/ckpt"))
expect_error("bob replaces alice/ckpt: AccessDenied", "AccessDenied 403",
    lambda: bob.put_object(Bucket="arch", Key="alice/ckpt", Body=b"evil"))
expect_error("bob deletes alice/ckpt: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_object(Bucket="arch", Key="alice/ckpt"))
body = attempt("alice get", lambda: alice.get_object(Bucket="arch", Key="alice/ckpt")["Body"].read())
check(body == b"A" * 5000, "alice reads her own object", body and len(body))
attempt("alice replaces", lambda: alice.put_object(Bucket="arch", Key="alice/ckpt", Body=b"a" * 6000))
body = attempt("alice get 2", lambda: alice.get_object(Bucket="arch", Key="alice/ckpt")["Body"].read())
check(body == b"a" * 6000, "alice replaces her own object", body and len(body))
expect_error("bob deletes the configured bucket: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_bucket(Bucket="arch"))
'
# the objects reach tape: they join the bucket's dataset (root's, 0600)
for _ in $(seq 100); do
    [ "$(sql "SELECT count(*) FROM push_items WHERE state <> 'DURABLE'")" = 0 ] && break
    sleep 0.1
done
is "$(sql "SELECT owner_uid || ' ' || mode FROM datasets WHERE name = 'arch'")" "0 384" \
    "the dataset of arch is root's, mode 0600 (s3.archive_bucket_mode)"
is "$(sql "SELECT count(*) FROM dataset_members m JOIN datasets d ON d.id = m.dataset_id WHERE d.name = 'arch'")" 2 \
    "both objects are archived into it"
aws_as() {  # aws_as KEY SECRET ARGS...
    local k=$1 s=$2; shift 2
    S3_KEY=$k S3_SECRET=$s aws_s3 "$@"
}
printf 'bob2' > "$TEST_DIR/bob2"
run_ok "awscli: bob copies a file into arch" -- aws_as "$KEY_BOB" "$SECRET_BOB" s3 cp --no-progress "$TEST_DIR/bob2" s3://arch/bob/two
is "$(aws_as "$KEY_BOB" "$SECRET_BOB" s3 ls --recursive s3://arch/ 2>&1 | awk '{print $4}' | tr '\n' ' ')" "bob/ckpt bob/two " \
    "awscli: bob lists his two objects only (archived ones too)"
run_fails_with "awscli: bob cannot read alice's archived checkpoint" "403|Forbidden" -- \
    aws_as "$KEY_BOB" "$SECRET_BOB" s3 cp --no-progress s3://arch/alice/ckpt "$TEST_DIR/stolen"
run_ok "awscli: alice reads her archived checkpoint" -- \
    aws_as "$KEY_ALICE" "$SECRET_ALICE" s3 cp --no-progress s3://arch/alice/ckpt "$TEST_DIR/mine"
is "$(stat -c %s "$TEST_DIR/mine" 2>/dev/null)" 6000 "awscli: alice's copy has her 6000 bytes"

# s3.archive_bucket_mode = 0644: everyone reads everyone's, deletes only their own
stop
S3_CONF_EXTRA='archive_bucket_mode = "0644";'
s3_write_conf ""
s3_start_ok "stageind restarts with s3.archive_bucket_mode = 0644"
is "$(sql "SELECT owner_uid || ' ' || mode FROM datasets WHERE name = 'arch'")" "0 420" \
    "the dataset of arch takes the new mode"
users_checks '
body = attempt("bob reads", lambda: bob.get_object(Bucket="arch", Key="alice/ckpt")["Body"].read())
check(body == b"a" * 6000, "bob reads alice/ckpt (0644)", body and len(body))
expect_error("bob deletes alice/ckpt: AccessDenied", "AccessDenied 403",
    lambda: bob.delete_object(Bucket="arch", Key="alice/ckpt"))
expect_error("bob replaces alice/ckpt: AccessDenied", "AccessDenied 403",
    lambda: bob.put_object(Bucket="arch", Key="alice/ckpt", Body=b"evil"))
check(attempt("bob deletes his", lambda: bob.delete_object(Bucket="arch", Key="bob/two")) is not None,
      "bob deletes his own object")
check(attempt("root deletes", lambda: root.delete_object(Bucket="arch", Key="bob/ckpt")) is not None,
      "root deletes any object")
'

# a configured bucket may not take over a dataset S3 or push did not make
stop
sed -i 's/archive_buckets = \[ "upl", "arch" \]/archive_buckets = [ "upl", "arch", "abkt" ]/' "$STAGEIN_CONF"
start 2>"$TEST_DIR/takeover.err"
grep -q "s3.archive_buckets: 'abkt' names a dataset" "$TEST_DIR/takeover.err" "$LOG" &&
    ok 0 "configuring alice's abkt as a shared bucket: stageind refuses to start, naming it" ||
    { ok 1 "configuring alice's abkt as a shared bucket: stageind refuses to start, naming it"
      tail -3 "$TEST_DIR/takeover.err" "$LOG" | sed 's/^/# /'; }
[ -n "$(daemon_pid)" ] && kill -0 "$(daemon_pid)" 2>/dev/null && track_pid "$(daemon_pid)"
is "$(sql "SELECT owner_uid || ' ' || mode FROM datasets WHERE name = 'abkt'")" "1001 384" \
    "... and abkt stays alice's"
finish
