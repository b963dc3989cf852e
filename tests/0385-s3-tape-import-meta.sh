#!/bin/bash
# What an S3 client stores with an object survives the tape and a catalog
# rebuilt from the volume alone: objects PUT with boto3 (Content-Type,
# Cache-Control, Content-Disposition, x-amz-meta-*, a storage class) into an
# archive bucket are archived; `stagein tape dump` shows their
# STAGEIN.headers and STAGEIN.storage_class pax records; the volume is
# imported into a fresh state directory's catalog with `stagein tape import`;
# a stageind on that state answers HEAD and GET (after a restore from tape)
# with the same headers and bytes.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

head -c 200007 /dev/urandom > "$OUT/m1"
head -c 5000 /dev/urandom > "$OUT/m2"

# ---- PUT into the archive bucket, wait for the tape copies ------------------------------
s3_setup P
s3_start_ok "stageind starts (archive bucket arch)"
res=$(OUT=$OUT boto3_run "
out = os.environ['OUT']
$BOTO3_CHECKS
try:
    s3.put_object(Bucket='arch', Key='meta/m1', Body=open(out + '/m1', 'rb').read(),
                  ContentType='text/csv; charset=utf-8', CacheControl='max-age=3600, private',
                  ContentDisposition='attachment; filename=\"m 1.csv\"',
                  Metadata={'owner': 'alice', 'note': 'back\\\\slash = 100%'})
    check(True, 'PUT meta/m1 with Content-Type, Cache-Control, Content-Disposition, x-amz-meta-*')
    s3.put_object(Bucket='arch', Key='meta/m2', Body=open(out + '/m2', 'rb').read(),
                  StorageClass='DEEP_ARCHIVE', Metadata={'run': '7'})
    check(True, 'PUT meta/m2 with x-amz-storage-class DEEP_ARCHIVE')
except ClientError as e:
    check(False, 'PUTs', code_of(e))
print('done')
")
boto3_tap "$res"
is "$(s3_wait_tape_copies '%arch/meta/m_' 2)" 2 "both objects reach tape (tape copies in the catalog)"
label=$(sql "SELECT DISTINCT v.label FROM tape_copies t JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id WHERE o.key LIKE '%arch/meta/m1'")
is "$(sql "SELECT count(DISTINCT t.volume_id) FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.key LIKE '%arch/meta/m_'")" 1 \
    "one volume holds both ($label)"
# the catalog's names of the two objects (the S3 bucket maps onto a catalog prefix)
names=$(sql "SELECT bucket || '/' || key FROM objects WHERE key LIKE '%arch/meta/m_' ORDER BY key")
stop
OLD_STATE=$STATE

# ---- the records on the volume -----------------------------------------------------------
dump=$(tape dump "$label" --json)
ok $? "tape dump $label --json"
get_dump() {  # get_dump KEY FIELD
    python3 -c 'import json, sys
for r in json.loads(sys.argv[1]):
    if r["member"] and r["member"].endswith("/arch/" + sys.argv[2]): print(r[sys.argv[3]])' "$dump" "$1" "$2"
}
# the x-amz-meta-* lines come in the order the client sent them
is "$(get_dump meta/m1 headers | sed 's/\\n/\n/g' | sort | tr '\n' '|')" \
    '|cache-control: max-age=3600, private|content-disposition: attachment; filename="m 1.csv"|content-type: text/csv; charset=utf-8|x-amz-meta-note: back\\slash = 100%|x-amz-meta-owner: alice|' \
    "dump: meta/m1's STAGEIN.headers, the backslash escaped"
is "$(get_dump meta/m1 headers | wc -l)" 1 "dump: the headers are one line (newlines escaped)"
is "$(get_dump meta/m2 storage_class)" DEEP_ARCHIVE "dump: meta/m2's STAGEIN.storage_class"
is "$(get_dump meta/m1 storage_class)" None "dump: no storage class record for meta/m1"
ok "$(tape dump "$label" | grep -q 'x-amz-meta-owner: alice'; echo $?)" "the human dump shows the headers too"
run_ok "dump --verify re-reads the volume" -- tape dump "$label" --verify

# ---- a fresh state directory: its catalog rebuilt from the volume alone -------------------
use_state N
write_conf ""
"$STAGEIN" catalog init >/dev/null
mkdir -p "$STATE/volumes"
cp "$OLD_STATE/volumes/$label.vol" "$STATE/volumes/"
run_ok "stagein tape import $label into the new catalog" -- tape import "$label"
is "$(sql "SELECT o.key || ' ' || coalesce(m.storage_class, '-') FROM objects o JOIN object_meta m ON m.object_id = o.id ORDER BY o.key" | sed 's|.*arch/||' | tr '\n' ,)" \
    "meta/m1 -,meta/m2 DEEP_ARCHIVE," "object_meta restored for both objects, for nothing else"
before=$(sql "SELECT group_concat(headers, '|') FROM object_meta")
run_ok "a second import" -- tape import "$label"
is "$(sql "SELECT group_concat(headers, '|') FROM object_meta")" "$before" "importing again changes nothing"
echo "$names" > "$TEST_DIR/meta.manifest"
"$STAGEIN" catalog define metads "$TEST_DIR/meta.manifest" --owner root:root --mode 0644 >/dev/null
S3_PORT=$(free_port)
S3_ENDPOINT=127.0.0.1:$S3_PORT
S3_URL=http://$S3_ENDPOINT
s3_write_conf ""
s3_start_ok "stageind starts on the imported catalog"

res=$(OUT=$OUT boto3_run "
out = os.environ['OUT']
$BOTO3_CHECKS
try:
    h = s3.head_object(Bucket='arch', Key='meta/m1')
    check(h.get('ContentType') == 'text/csv; charset=utf-8', 'HEAD: Content-Type', h.get('ContentType'))
    check(h.get('CacheControl') == 'max-age=3600, private', 'HEAD: Cache-Control', h.get('CacheControl'))
    check(h.get('ContentDisposition') == 'attachment; filename=\"m 1.csv\"', 'HEAD: Content-Disposition',
          h.get('ContentDisposition'))
    check(h['Metadata'] == {'owner': 'alice', 'note': 'back\\\\slash = 100%'}, 'HEAD: x-amz-meta-*', h['Metadata'])
    check(h.get('StorageClass') == 'GLACIER', 'HEAD: on tape only, GLACIER', h.get('StorageClass'))
    h2 = s3.head_object(Bucket='arch', Key='meta/m2')
    check(h2.get('StorageClass') == 'DEEP_ARCHIVE', 'HEAD meta/m2: the storage class asked for at upload',
          h2.get('StorageClass'))
    check(h2['Metadata'] == {'run': '7'}, 'HEAD meta/m2: x-amz-meta-run', h2['Metadata'])
    s3.restore_object(Bucket='arch', Key='meta/m1', RestoreRequest={'Days': 1})
    for _ in range(300):
        r = s3.head_object(Bucket='arch', Key='meta/m1').get('Restore', '')
        if 'ongoing-request=\"false\"' in r:
            break
        time.sleep(0.2)
    check('ongoing-request=\"false\"' in r, 'restored from the imported volume', r)
    g = s3.get_object(Bucket='arch', Key='meta/m1')
    body = g['Body'].read()
    check(body == open(out + '/m1', 'rb').read(), 'GET after the restore: byte-identical', len(body))
    check(g.get('ContentType') == 'text/csv; charset=utf-8' and g.get('CacheControl') == 'max-age=3600, private'
          and g['Metadata'] == {'owner': 'alice', 'note': 'back\\\\slash = 100%'},
          'GET: the stored headers', (g.get('ContentType'), g.get('CacheControl'), g['Metadata']))
except ClientError as e:
    check(False, 'HEAD/GET after the import', code_of(e))
print('done')
")
boto3_tap "$res"
stop
finish
