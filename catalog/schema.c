/* The catalog schema as a table of upgrade steps, one list for both engines. */
#include "config.h"
#include "catalog/schema.h"
#include "catalog/catalog.h"

#include <stddef.h>

/* Version 1.0: the whole model. */
static const char schema_1000[] =
    "CREATE TABLE volumes ("
    "  id INTEGER PRIMARY KEY,"
    "  label TEXT NOT NULL UNIQUE,"
    "  media TEXT NOT NULL DEFAULT 'LTO-9',"
    "  library TEXT NOT NULL DEFAULT 'sim',"
    "  state TEXT NOT NULL DEFAULT 'online'"
    "    CHECK (state IN ('online','offline','full','disabled','failed')),"
    "  capacity_bytes INTEGER NOT NULL DEFAULT 18000000000000 CHECK (capacity_bytes >= 0),"
    "  used_bytes INTEGER NOT NULL DEFAULT 0 CHECK (used_bytes >= 0)"
    ");"
    "CREATE TABLE objects ("
    "  id INTEGER PRIMARY KEY,"
    "  bucket TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  size INTEGER NOT NULL CHECK (size >= 0),"
    "  checksum TEXT,"
    "  mtime INTEGER,"
    "  etag TEXT,"
    "  UNIQUE (bucket, key)"
    ");"
    "CREATE TABLE tape_copies ("
    "  object_id INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,"
    "  copy INTEGER NOT NULL CHECK (copy >= 1),"
    "  volume_id INTEGER NOT NULL REFERENCES volumes(id),"
    "  file_seq INTEGER,"
    "  position INTEGER NOT NULL CHECK (position >= 0),"
    "  length INTEGER NOT NULL CHECK (length >= 0),"
    "  PRIMARY KEY (object_id, copy)"
    ") WITHOUT ROWID;"
    "CREATE INDEX tape_copies_by_volume ON tape_copies(volume_id, position);"
    "CREATE TABLE datasets ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  owner_uid INTEGER NOT NULL,"
    "  owner_gid INTEGER NOT NULL,"
    "  mode INTEGER NOT NULL DEFAULT 420 CHECK (mode BETWEEN 0 AND 511),"
    "  description TEXT,"
    "  created INTEGER NOT NULL"
    ");"
    "CREATE TABLE dataset_members ("
    "  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,"
    "  object_id INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,"
    "  PRIMARY KEY (dataset_id, object_id)"
    ") WITHOUT ROWID;"
    "CREATE INDEX dataset_members_by_object ON dataset_members(object_id);"
    "CREATE TABLE requests ("
    "  id INTEGER PRIMARY KEY,"
    "  uuid TEXT NOT NULL UNIQUE,"
    "  uid INTEGER NOT NULL,"
    "  gid INTEGER NOT NULL,"
    "  job_id TEXT,"
    "  priority INTEGER NOT NULL DEFAULT 0,"
    "  deadline INTEGER,"
    "  pin_lifetime INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN"
    "    ('SUBMITTED','STARTED','COMPLETED','FAILED','CANCELLED','RELEASED')),"
    "  error TEXT,"
    "  created REAL NOT NULL,"
    "  updated REAL NOT NULL"
    ");"
    "CREATE INDEX requests_by_state ON requests(state);"
    "CREATE TABLE request_items ("
    "  request_id INTEGER NOT NULL REFERENCES requests(id) ON DELETE CASCADE,"
    "  object_id INTEGER NOT NULL REFERENCES objects(id),"
    "  state TEXT NOT NULL CHECK (state IN"
    "    ('SUBMITTED','STARTED','COMPLETED','FAILED','CANCELLED')),"
    "  bytes_done INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT,"
    "  started REAL,"
    "  finished REAL,"
    "  PRIMARY KEY (request_id, object_id)"
    ") WITHOUT ROWID;"
    "CREATE INDEX request_items_by_object ON request_items(object_id);"
    "CREATE TABLE cache ("
    "  object_id INTEGER PRIMARY KEY REFERENCES objects(id) ON DELETE CASCADE,"
    "  path TEXT NOT NULL,"
    "  size INTEGER NOT NULL CHECK (size >= 0),"
    "  pins INTEGER NOT NULL DEFAULT 0 CHECK (pins >= 0),"
    "  last_access REAL NOT NULL,"
    "  verified INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE TABLE events ("
    "  id INTEGER PRIMARY KEY,"
    "  time REAL NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  subject TEXT,"
    "  detail TEXT"
    ");";
static const char schema_1000_sqlite[] =
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events"
    "  BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;"
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"
    "  BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;";
/* PostgreSQL: SQLite's functions that the catalog's statements use
 * (two-argument max and min, instr, datetime(t, 'unixepoch'), printf of a
 * mode as '%04o', sum of conditions), so that each statement is written once. */
static const char schema_1000_postgres[] =
    "CREATE FUNCTION sum_true(n BIGINT, c BOOLEAN) RETURNS BIGINT LANGUAGE sql IMMUTABLE"
    "  AS 'SELECT n + CASE WHEN c THEN 1 ELSE 0 END';"
    "CREATE AGGREGATE sum(BOOLEAN) (SFUNC = sum_true, STYPE = BIGINT, INITCOND = '0');"
    "CREATE FUNCTION printf(fmt TEXT, v BIGINT) RETURNS TEXT LANGUAGE plpgsql IMMUTABLE AS $$"
    " BEGIN"
    "  IF fmt <> '%04o' OR v < 0 OR v > 4095 THEN"
    "   RAISE EXCEPTION 'printf(%, %): only a mode as %%04o is supported', fmt, v;"
    "  END IF;"
    "  RETURN ((v >> 9) & 7)::text || ((v >> 6) & 7)::text || ((v >> 3) & 7)::text"
    "   || (v & 7)::text;"
    " END $$;"
    "CREATE FUNCTION max(a BIGINT, b BIGINT) RETURNS BIGINT LANGUAGE sql IMMUTABLE"
    "  AS 'SELECT greatest(a, b)';"
    "CREATE FUNCTION min(a BIGINT, b BIGINT) RETURNS BIGINT LANGUAGE sql IMMUTABLE"
    "  AS 'SELECT least(a, b)';"
    "CREATE FUNCTION max(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION"
    "  LANGUAGE sql IMMUTABLE AS 'SELECT greatest(a, b)';"
    "CREATE FUNCTION min(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION"
    "  LANGUAGE sql IMMUTABLE AS 'SELECT least(a, b)';"
    "CREATE FUNCTION instr(s TEXT, sub TEXT) RETURNS INTEGER LANGUAGE sql IMMUTABLE"
    "  AS 'SELECT strpos(s, sub)';"
    "CREATE FUNCTION datetime(t DOUBLE PRECISION, unit TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE"
    "  AS $$SELECT to_char(to_timestamp(t) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')$$;"
    "CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS"
    "  $$ BEGIN RAISE EXCEPTION 'the event log is append-only'; END $$;"
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events"
    "  FOR EACH ROW EXECUTE FUNCTION events_append_only();"
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"
    "  FOR EACH ROW EXECUTE FUNCTION events_append_only();";

/* Version 1.1: S3 storage classes (Glacier semantics) and event lookups by time. */
static const char schema_1001[] =
    "ALTER TABLE objects ADD COLUMN storage_class TEXT NOT NULL DEFAULT 'GLACIER';"
    "CREATE INDEX events_by_time ON events(time);";

/* Version 1.2: per-dataset totals kept with the dataset, so the summary of
 * every dataset does not rescan millions of members. NULL = stale: changes
 * to members or tape copies mark it (catalog_copy_put and dataset definition
 * do so for inserts, in code, because an insert trigger costs a statement
 * journal per row in bulk imports; these triggers cover the rare deletes and
 * moves); imports refresh stale totals and readers compute them on the fly. */
static const char schema_1002[] =
    "ALTER TABLE datasets ADD COLUMN stat_objects INTEGER;"
    "ALTER TABLE datasets ADD COLUMN stat_bytes INTEGER;"
    "ALTER TABLE datasets ADD COLUMN stat_volumes INTEGER;";
static const char schema_1002_sqlite[] =
    "CREATE TRIGGER tape_copies_delete_stale AFTER DELETE ON tape_copies BEGIN"
    "  UPDATE datasets SET stat_volumes = NULL WHERE id IN"
    "   (SELECT dataset_id FROM dataset_members WHERE object_id = OLD.object_id);"
    " END;"
    "CREATE TRIGGER tape_copies_update_stale AFTER UPDATE OF volume_id ON tape_copies BEGIN"
    "  UPDATE datasets SET stat_volumes = NULL WHERE id IN"
    "   (SELECT dataset_id FROM dataset_members WHERE object_id = NEW.object_id);"
    " END;"
    "CREATE TRIGGER dataset_members_delete_stale AFTER DELETE ON dataset_members BEGIN"
    "  UPDATE datasets SET stat_volumes = NULL, stat_objects = NULL, stat_bytes = NULL"
    "   WHERE id = OLD.dataset_id AND stat_objects IS NOT NULL;"
    " END;";
static const char schema_1002_postgres[] =
    "CREATE FUNCTION tape_copies_delete_stale() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  UPDATE datasets SET stat_volumes = NULL WHERE id IN"
    "   (SELECT dataset_id FROM dataset_members WHERE object_id = OLD.object_id);"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER tape_copies_delete_stale AFTER DELETE ON tape_copies"
    "  FOR EACH ROW EXECUTE FUNCTION tape_copies_delete_stale();"
    "CREATE FUNCTION tape_copies_update_stale() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  UPDATE datasets SET stat_volumes = NULL WHERE id IN"
    "   (SELECT dataset_id FROM dataset_members WHERE object_id = NEW.object_id);"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER tape_copies_update_stale AFTER UPDATE OF volume_id ON tape_copies"
    "  FOR EACH ROW EXECUTE FUNCTION tape_copies_update_stale();"
    "CREATE FUNCTION dataset_members_delete_stale() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  UPDATE datasets SET stat_volumes = NULL, stat_objects = NULL, stat_bytes = NULL"
    "   WHERE id = OLD.dataset_id AND stat_objects IS NOT NULL;"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER dataset_members_delete_stale AFTER DELETE ON dataset_members"
    "  FOR EACH ROW EXECUTE FUNCTION dataset_members_delete_stale();";

/* Version 1.3: which requests pin which cached object, so a restart knows
 * (cache.pins stays the count, kept by triggers, so readers of the count and
 * the eviction index need no join). Existing pins are rebuilt from the
 * completed items of requests not yet released, which is what they counted;
 * the index serves the cache's LRU eviction (unpinned, oldest access first). */
static const char schema_1003[] =
    "CREATE TABLE cache_pins ("
    "  object_id INTEGER NOT NULL REFERENCES cache(object_id) ON DELETE CASCADE,"
    "  request_id INTEGER NOT NULL REFERENCES requests(id) ON DELETE CASCADE,"
    "  since REAL NOT NULL,"
    "  PRIMARY KEY (object_id, request_id)"
    ") WITHOUT ROWID;"
    "CREATE INDEX cache_pins_by_request ON cache_pins(request_id);"
    "CREATE INDEX cache_by_access ON cache(pins, last_access);";
#define SCHEMA_1003_REBUILD                                                  \
    "  SELECT i.object_id, i.request_id, coalesce(i.finished, r.updated)"    \
    "  FROM request_items i JOIN requests r ON r.id = i.request_id"          \
    "  JOIN cache c ON c.object_id = i.object_id"                            \
    "  WHERE i.state = 'COMPLETED' AND r.state <> 'RELEASED'"
#define SCHEMA_1003_RECOUNT                                                  \
    "UPDATE cache SET pins ="                                                \
    "  (SELECT count(*) FROM cache_pins p WHERE p.object_id = cache.object_id);"
static const char schema_1003_sqlite[] =
    "INSERT OR IGNORE INTO cache_pins(object_id, request_id, since)" SCHEMA_1003_REBUILD ";"
    SCHEMA_1003_RECOUNT
    "CREATE TRIGGER cache_pins_insert AFTER INSERT ON cache_pins BEGIN"
    "  UPDATE cache SET pins = pins + 1 WHERE object_id = NEW.object_id;"
    " END;"
    "CREATE TRIGGER cache_pins_delete AFTER DELETE ON cache_pins BEGIN"
    "  UPDATE cache SET pins = pins - 1 WHERE object_id = OLD.object_id AND pins > 0;"
    " END;";
/* cache_pin_new/cache_unpin_new/cache_unpin_old serve 1.4's triggers too. */
static const char schema_1003_postgres[] =
    "INSERT INTO cache_pins(object_id, request_id, since)" SCHEMA_1003_REBUILD
    "  ON CONFLICT DO NOTHING;"
    SCHEMA_1003_RECOUNT
    "CREATE FUNCTION cache_pin_new() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  UPDATE cache SET pins = pins + 1 WHERE object_id = NEW.object_id;"
    "  RETURN NULL; END $$;"
    "CREATE FUNCTION cache_unpin_new() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  UPDATE cache SET pins = pins - 1 WHERE object_id = NEW.object_id AND pins > 0;"
    "  RETURN NULL; END $$;"
    "CREATE FUNCTION cache_unpin_old() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  UPDATE cache SET pins = pins - 1 WHERE object_id = OLD.object_id AND pins > 0;"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER cache_pins_insert AFTER INSERT ON cache_pins"
    "  FOR EACH ROW EXECUTE FUNCTION cache_pin_new();"
    "CREATE TRIGGER cache_pins_delete AFTER DELETE ON cache_pins"
    "  FOR EACH ROW EXECUTE FUNCTION cache_unpin_old();";

/* Version 1.4: pushes (stage-out). A push groups files one user sent into a
 * dataset; each file is an object in the push bucket and one push item.
 * RECEIVING: the body is arriving (never acknowledged; removed at restart);
 * RECEIVED: in the cache, acknowledged; ARCHIVING: in an archive write;
 * DURABLE: its tape copies, dataset membership and this state were
 * committed together; FAILED: with the reason; DISCARDED: a refused upload
 * being removed. An item RECEIVING, RECEIVED or ARCHIVING holds one pin on
 * its object's cache row (kept by these triggers, so the cache's LRU never
 * evicts the only copy of acknowledged data; cache_pins is for requests). */
static const char schema_1004[] =
    "CREATE TABLE pushes ("
    "  id INTEGER PRIMARY KEY,"
    "  uuid TEXT NOT NULL UNIQUE,"
    "  uid INTEGER NOT NULL,"
    "  gid INTEGER NOT NULL,"
    "  dataset_id INTEGER NOT NULL REFERENCES datasets(id),"
    "  created REAL NOT NULL,"
    "  updated REAL NOT NULL"
    ");"
    "CREATE TABLE push_items ("
    "  object_id INTEGER PRIMARY KEY REFERENCES objects(id),"
    "  push_id INTEGER NOT NULL REFERENCES pushes(id) ON DELETE CASCADE,"
    "  state TEXT NOT NULL CHECK (state IN"
    "    ('RECEIVING','RECEIVED','ARCHIVING','DURABLE','FAILED','DISCARDED')),"
    "  error TEXT,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  received REAL,"
    "  finished REAL"
    ");"
    "CREATE INDEX push_items_by_push ON push_items(push_id);"
    "CREATE INDEX push_items_by_state ON push_items(state, received);";
#define PUSH_PINNED "('RECEIVING','RECEIVED','ARCHIVING')"
static const char schema_1004_postgres[] =
    "CREATE FUNCTION push_items_pin_new_cache_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  IF EXISTS (SELECT 1 FROM push_items WHERE object_id = NEW.object_id"
    "             AND state IN " PUSH_PINNED ") THEN"
    "   UPDATE cache SET pins = pins + 1 WHERE object_id = NEW.object_id;"
    "  END IF; RETURN NULL; END $$;"
    "CREATE TRIGGER push_items_pin_new_cache_row AFTER INSERT ON cache"
    "  FOR EACH ROW EXECUTE FUNCTION push_items_pin_new_cache_row();"
    "CREATE TRIGGER push_items_unpin_on_state AFTER UPDATE OF state ON push_items FOR EACH ROW"
    "  WHEN (OLD.state IN " PUSH_PINNED " AND NEW.state NOT IN " PUSH_PINNED ")"
    "  EXECUTE FUNCTION cache_unpin_new();"
    "CREATE TRIGGER push_items_pin_on_state AFTER UPDATE OF state ON push_items FOR EACH ROW"
    "  WHEN (OLD.state NOT IN " PUSH_PINNED " AND NEW.state IN " PUSH_PINNED ")"
    "  EXECUTE FUNCTION cache_pin_new();"
    "CREATE TRIGGER push_items_unpin_on_delete AFTER DELETE ON push_items FOR EACH ROW"
    "  WHEN (OLD.state IN " PUSH_PINNED ") EXECUTE FUNCTION cache_unpin_old();";
static const char schema_1004_sqlite[] =
    "CREATE TRIGGER push_items_pin_new_cache_row AFTER INSERT ON cache"
    "  WHEN EXISTS (SELECT 1 FROM push_items WHERE object_id = NEW.object_id"
    "               AND state IN ('RECEIVING','RECEIVED','ARCHIVING')) BEGIN"
    "  UPDATE cache SET pins = pins + 1 WHERE object_id = NEW.object_id;"
    " END;"
    "CREATE TRIGGER push_items_unpin_on_state AFTER UPDATE OF state ON push_items"
    "  WHEN OLD.state IN ('RECEIVING','RECEIVED','ARCHIVING')"
    "   AND NEW.state NOT IN ('RECEIVING','RECEIVED','ARCHIVING') BEGIN"
    "  UPDATE cache SET pins = pins - 1 WHERE object_id = NEW.object_id AND pins > 0;"
    " END;"
    "CREATE TRIGGER push_items_pin_on_state AFTER UPDATE OF state ON push_items"
    "  WHEN OLD.state NOT IN ('RECEIVING','RECEIVED','ARCHIVING')"
    "   AND NEW.state IN ('RECEIVING','RECEIVED','ARCHIVING') BEGIN"
    "  UPDATE cache SET pins = pins + 1 WHERE object_id = NEW.object_id;"
    " END;"
    "CREATE TRIGGER push_items_unpin_on_delete AFTER DELETE ON push_items"
    "  WHEN OLD.state IN ('RECEIVING','RECEIVED','ARCHIVING') BEGIN"
    "  UPDATE cache SET pins = pins - 1 WHERE object_id = OLD.object_id AND pins > 0;"
    " END;";

/* Version 1.5: a request's life follows its holders. A holder is what keeps
 * a request wanted: the submission that made it (SPANK allocator context,
 * "node:sid" until Slurm names the job), a job (or array task), or a whole
 * job array; running = a job that has started on a node (its pins never
 * expire while it runs). A request whose last holder goes is released; one
 * that finished (finished = when) keeps its pins for pin_lifetime seconds
 * unless a running job holds it, then is released as expired. end_reason
 * says why a request ended, for users and admins. */
static const char schema_1005[] =
    "ALTER TABLE requests ADD COLUMN finished REAL;"
    "ALTER TABLE requests ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE requests ADD COLUMN end_reason TEXT;"
    "UPDATE requests SET finished = updated"
    "  WHERE state IN ('COMPLETED', 'FAILED', 'CANCELLED', 'RELEASED');"
    "CREATE INDEX requests_by_finished ON requests(finished);"
    "CREATE TABLE request_holders ("
    "  request_id INTEGER NOT NULL REFERENCES requests(id) ON DELETE CASCADE,"
    "  kind TEXT NOT NULL CHECK (kind IN ('submission', 'job', 'array')),"
    "  holder TEXT NOT NULL,"
    "  running INTEGER NOT NULL DEFAULT 0,"
    "  since REAL NOT NULL,"
    "  PRIMARY KEY (request_id, kind, holder)"
    ") WITHOUT ROWID;"
    "CREATE INDEX request_holders_by_holder ON request_holders(kind, holder);"
    "INSERT INTO request_holders(request_id, kind, holder, running, since)"
    "  SELECT id, 'job', job_id, 0, created FROM requests"
    "  WHERE job_id IS NOT NULL AND state <> 'RELEASED';";

/* Version 1.6: what S3 clients store with an object beside its bytes: the
 * standard headers and x-amz-meta-* (one "name: value" line each, names in
 * lower case), the storage class asked for at upload (NULL: none asked; the
 * object reads as its objects.storage_class says), and a multipart object's
 * part sizes ("n1,n2,...", for GET ?partNumber). Goes with its object. */
static const char schema_1006[] =
    "CREATE TABLE object_meta ("
    "  object_id INTEGER PRIMARY KEY REFERENCES objects(id) ON DELETE CASCADE,"
    "  headers TEXT,"
    "  storage_class TEXT,"
    "  part_sizes TEXT"
    ");";

/* Version 1.7: the site the catalog belongs to (one row, written by the
 * first stagein of the site that opens it), so that one site's stagein
 * refuses another's database. */
static const char schema_1007[] =
    "CREATE TABLE site ("
    "  name TEXT NOT NULL PRIMARY KEY"
    ");";

/* Version 1.8: several stageind instances on one catalog. Each instance
 * registers by name and beats (heartbeat, wall-clock seconds); a lease is
 * (kind, name) held by one instance until expires, renewed with its
 * heartbeat (catalog/instances.c). */
static const char schema_1008[] =
    "CREATE TABLE instances ("
    "  name TEXT NOT NULL PRIMARY KEY,"
    "  host TEXT NOT NULL,"
    "  pid INTEGER NOT NULL,"
    "  started REAL NOT NULL,"
    "  heartbeat REAL NOT NULL"
    ");"
    "CREATE TABLE leases ("
    "  kind TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  instance TEXT NOT NULL,"
    "  expires REAL NOT NULL,"
    "  PRIMARY KEY (kind, name)"
    ") WITHOUT ROWID;"
    "CREATE INDEX leases_by_instance ON leases(instance);";

/* Version 1.9: on PostgreSQL, tape_copies' references are enforced once per
 * statement instead of once per row: a bulk import's COPY of 5000 copies
 * paid two row-level foreign-key checks each, more than the COPY itself
 * (BENCHMARKS.md, "Imports by COPY"). The triggers keep what the REFERENCES
 * did: an insert or update naming a missing object or volume fails with
 * SQLSTATE 23503 (foreign_key_violation) naming the id; the referenced rows
 * are locked FOR KEY SHARE as the row checks did, so that a concurrent
 * delete waits for the inserter and then sees its copies; deleting objects
 * deletes their copies; deleting a volume still referenced, or changing a
 * referenced id, is refused. SQLite keeps its REFERENCES (cheap there). */
/* 1.9's checks, 1.11 reuses them: the objects, then the volumes, locked
 * FOR KEY SHARE and counted against the ids wanted. */
#define REFS_LOCK_OBJECTS \
    "  SELECT count(*) INTO locked FROM (SELECT 1 FROM objects o" \
    "   WHERE o.id IN (SELECT object_id FROM new_copies) FOR KEY SHARE OF o) l;" \
    "  IF locked < wanted THEN" \
    "   SELECT n.object_id INTO missing FROM new_copies n" \
    "    WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.id = n.object_id) LIMIT 1;" \
    "   RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation'," \
    "    MESSAGE = format('tape copy of object %s: no such object (foreign key'" \
    "     || ' tape_copies.object_id -> objects.id)', missing);" \
    "  END IF;"
/* The first copy whose volume is missing, named in the error. */
#define REFS_RAISE_MISSING_VOLUME \
    "   SELECT n.volume_id INTO missing FROM new_copies n" \
    "    WHERE NOT EXISTS (SELECT 1 FROM volumes v WHERE v.id = n.volume_id) LIMIT 1;" \
    "   RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation'," \
    "    MESSAGE = format('tape copy on volume %s: no such volume (foreign key'" \
    "     || ' tape_copies.volume_id -> volumes.id)', missing);"
#define REFS_CHECK_VOLUMES \
    "  SELECT count(DISTINCT volume_id) INTO wanted FROM new_copies;" \
    "  SELECT count(*) INTO locked FROM (SELECT 1 FROM volumes v" \
    "   WHERE v.id IN (SELECT volume_id FROM new_copies) FOR KEY SHARE OF v) l;" \
    "  IF locked < wanted THEN" \
    REFS_RAISE_MISSING_VOLUME \
    "  END IF;"

static const char schema_1009_postgres[] =
    "ALTER TABLE tape_copies DROP CONSTRAINT tape_copies_object_id_fkey;"
    "ALTER TABLE tape_copies DROP CONSTRAINT tape_copies_volume_id_fkey;"
    "CREATE FUNCTION tape_copies_check_references() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE wanted BIGINT; locked BIGINT; missing BIGINT;"
    " BEGIN"
    "  SELECT count(DISTINCT object_id) INTO wanted FROM new_copies;"
    REFS_LOCK_OBJECTS
    REFS_CHECK_VOLUMES
    "  RETURN NULL;"
    " END $$;"
    "CREATE TRIGGER tape_copies_references_insert AFTER INSERT ON tape_copies"
    "  REFERENCING NEW TABLE AS new_copies"
    "  FOR EACH STATEMENT EXECUTE FUNCTION tape_copies_check_references();"
    "CREATE TRIGGER tape_copies_references_update AFTER UPDATE ON tape_copies"
    "  REFERENCING NEW TABLE AS new_copies"
    "  FOR EACH STATEMENT EXECUTE FUNCTION tape_copies_check_references();"
    "CREATE FUNCTION objects_delete_tape_copies() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  DELETE FROM tape_copies WHERE object_id IN (SELECT id FROM old_objects);"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER objects_delete_tape_copies AFTER DELETE ON objects"
    "  REFERENCING OLD TABLE AS old_objects"
    "  FOR EACH STATEMENT EXECUTE FUNCTION objects_delete_tape_copies();"
    /* ids are never changed by stagein: a row trigger on a change of id
     * only (no transition table goes with a column list) costs nothing else */
    "CREATE FUNCTION objects_keep_referenced_id() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  IF EXISTS (SELECT 1 FROM tape_copies WHERE object_id = OLD.id) THEN"
    "   RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',"
    "    MESSAGE = format('object %s has tape copies: its id cannot change (foreign key'"
    "     || ' tape_copies.object_id -> objects.id)', OLD.id);"
    "  END IF; RETURN NULL; END $$;"
    "CREATE TRIGGER objects_keep_referenced_id AFTER UPDATE OF id ON objects"
    "  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)"
    "  EXECUTE FUNCTION objects_keep_referenced_id();"
    "CREATE FUNCTION volumes_keep_referenced() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE gone BIGINT; BEGIN"
    "  SELECT o.id INTO gone FROM old_volumes o"
    "   WHERE NOT EXISTS (SELECT 1 FROM volumes v WHERE v.id = o.id)"
    "   AND EXISTS (SELECT 1 FROM tape_copies c WHERE c.volume_id = o.id) LIMIT 1;"
    "  IF FOUND THEN"
    "   RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',"
    "    MESSAGE = format('volume %s still has tape copies: refusing to %s it (foreign key'"
    "     || ' tape_copies.volume_id -> volumes.id)', gone, lower(TG_OP));"
    "  END IF; RETURN NULL; END $$;"
    "CREATE TRIGGER volumes_keep_referenced_delete AFTER DELETE ON volumes"
    "  REFERENCING OLD TABLE AS old_volumes"
    "  FOR EACH STATEMENT EXECUTE FUNCTION volumes_keep_referenced();"
    "CREATE TRIGGER volumes_keep_referenced_update AFTER UPDATE ON volumes"
    "  REFERENCING OLD TABLE AS old_volumes"
    "  FOR EACH STATEMENT EXECUTE FUNCTION volumes_keep_referenced();";

/* Version 1.10: the shared cache across instances. A reservation (space set
 * aside for an object being recalled or received) is recorded by its
 * instance, so that the others count it before they reserve; a live
 * instance's rows only count (a dead one's are dropped). An upload in
 * progress records its instance (push_items.instance, NULL alone), so that a
 * dead instance's uploads are found in the catalog. */
static const char schema_1010[] =
    "CREATE TABLE cache_reservations ("
    "  instance TEXT NOT NULL,"
    "  object_id INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL,"
    "  created REAL NOT NULL,"
    "  PRIMARY KEY (instance, object_id)"
    ");"
    "ALTER TABLE push_items ADD COLUMN instance TEXT;";

/* 1.11's object check: copies of objects the writer inserted need no lock
 * (the join is 1.9's, new ids driving index lookups: a filter on xmin, which
 * has no statistics, would let the planner scan objects per copy). */
#define REFS_OWN_OR_LOCK_OBJECTS \
    "  SELECT count(DISTINCT object_id) INTO wanted FROM new_copies;" \
    "  SELECT count(*) FILTER (WHERE o.xmin = writer) INTO own FROM objects o" \
    "   WHERE o.id IN (SELECT object_id FROM new_copies);" \
    "  IF own < wanted THEN" \
    REFS_LOCK_OBJECTS \
    "  END IF;"
/* The writer's xid, read from one of the new copies (pg 15 has no SQL test
 * of "my own xid" that sees subtransactions). */
#define REFS_WRITER \
    "  SELECT object_id, copy INTO one_object, one_copy FROM new_copies LIMIT 1;" \
    "  SELECT xmin INTO writer FROM tape_copies WHERE object_id = one_object AND copy = one_copy;"

/* Version 1.11: on PostgreSQL, the references check of 1.9 skips the FOR
 * KEY SHARE lock when every copy's object was inserted by the transaction
 * (or subtransaction) that writes the copies, as an import's batch does:
 * those rows are invisible to every other transaction until it commits, so
 * no concurrent delete can race the check. The writer's xid is read from one
 * of the new copies (pg 15 has no SQL test of "my own xid" that sees
 * subtransactions). The lock wrote one WAL record per object (12 % of an
 * import's WAL) and cost about a fifth of the server's CPU in an import
 * (BENCHMARKS.md). Any other case (an object older than the transaction)
 * takes 1.9's path unchanged. */
static const char schema_1011_postgres[] =
    "CREATE OR REPLACE FUNCTION tape_copies_check_references() RETURNS trigger"
    " LANGUAGE plpgsql AS $$"
    " DECLARE wanted BIGINT; locked BIGINT; missing BIGINT; own BIGINT;"
    "  one_object BIGINT; one_copy BIGINT; writer xid;"
    " BEGIN"
    REFS_WRITER
    REFS_OWN_OR_LOCK_OBJECTS
    REFS_CHECK_VOLUMES
    "  RETURN NULL;"
    " END $$;";

/* Version 1.12: a request's items by state, so that the request following
 * its items after each batch of completions (requests_follow_items) finds
 * whether any is still pending with one index probe: counting every item of
 * the request each time made a recall of N objects cost O(N^2 / batch). */
static const char schema_1012[] =
    "CREATE INDEX request_items_by_state ON request_items(request_id, state);";

/* 1.13's objects check, given the span (lo, hi) and count of the copies'
 * object ids. */
#define REFS_SPAN_OR_OWN_OBJECTS \
    "  IF hi - lo < copies THEN" \
    "   SELECT count(*) INTO own FROM objects o WHERE o.id BETWEEN lo AND hi AND o.xmin = writer;" \
    "  END IF;" \
    "  IF hi - lo >= copies OR own < hi - lo + 1 THEN" \
    REFS_OWN_OR_LOCK_OBJECTS \
    "  END IF;"

/* Version 1.13: on PostgreSQL, the references check proves an import
 * batch's objects in one index range scan: when the copies' object ids span
 * no more ids than there are copies and every id of that span is an object
 * the writer inserted, every copy's object exists and needs no lock. 1.11's
 * check (a distinct count, then one index probe per object through a hash of
 * the new ids) took 0.3-0.5 s of a 100,000-object import (BENCHMARKS.md);
 * a span with a gap, an older object or spread ids takes it unchanged. The
 * span bound keeps the scan no longer than the statement. */
static const char schema_1013_postgres[] =
    "CREATE OR REPLACE FUNCTION tape_copies_check_references() RETURNS trigger"
    " LANGUAGE plpgsql AS $$"
    " DECLARE wanted BIGINT; locked BIGINT; missing BIGINT; own BIGINT;"
    "  one_object BIGINT; one_copy BIGINT; writer xid; lo BIGINT; hi BIGINT; copies BIGINT;"
    " BEGIN"
    REFS_WRITER
    "  SELECT min(object_id), max(object_id), count(*) INTO lo, hi, copies FROM new_copies;"
    REFS_SPAN_OR_OWN_OBJECTS
    REFS_CHECK_VOLUMES
    "  RETURN NULL;"
    " END $$;";

/* 1.19's volume check: the batch's volumes from the pass that bounds its
 * object ids (one volume: no second pass), else grouped in one hashed pass,
 * then locked by id. */
#define REFS_CHECK_VOLUMES_ONE_PASS \
    "  IF vlo = vhi THEN vols := ARRAY[vlo];" \
    "  ELSE SELECT array_agg(volume_id) INTO vols FROM" \
    "   (SELECT volume_id FROM new_copies GROUP BY volume_id) g;" \
    "  END IF;" \
    "  SELECT count(*) INTO locked FROM (SELECT 1 FROM volumes v" \
    "   WHERE v.id = ANY (vols) FOR KEY SHARE OF v) l;" \
    "  IF locked < cardinality(vols) THEN" \
    REFS_RAISE_MISSING_VOLUME \
    "  END IF;"

/* Version 1.19: on PostgreSQL, the references check finds the copies'
 * volumes in the pass that already bounds their object ids, instead of a
 * sorted count(DISTINCT) and a second pass joining them to volumes: that
 * was 55 of the check's 120 ms in a 100,000-object import (BENCHMARKS.md).
 * The objects' check is 1.13's. */
static const char schema_1019_postgres[] =
    "CREATE OR REPLACE FUNCTION tape_copies_check_references() RETURNS trigger"
    " LANGUAGE plpgsql AS $$"
    " DECLARE wanted BIGINT; locked BIGINT; missing BIGINT; own BIGINT;"
    "  one_object BIGINT; one_copy BIGINT; writer xid; lo BIGINT; hi BIGINT; copies BIGINT;"
    "  vlo BIGINT; vhi BIGINT; vols BIGINT[];"
    " BEGIN"
    REFS_WRITER
    "  SELECT min(object_id), max(object_id), count(*), min(volume_id), max(volume_id)"
    "   INTO lo, hi, copies, vlo, vhi FROM new_copies;"
    REFS_SPAN_OR_OWN_OBJECTS
    REFS_CHECK_VOLUMES_ONE_PASS
    "  RETURN NULL;"
    " END $$;";

/* Version 1.14: segment files. Small objects (recalled or pushed) are packed
 * into shared cache files, each at a 4 KiB-aligned offset, instead of a file
 * each: a file per 64 KiB object cost its drive's thread more kernel work
 * (create, link, page-cache copy, the flush's walk over dirty inodes) than
 * the drive left it (BENCHMARKS.md). A segment's row exists before its file
 * (recovery removes a file without one) and is never reused (AUTOINCREMENT:
 * an id freed by one instance cannot name another's new file while the old
 * one is being unlinked); sealed once its writer appends no more, so that an
 * empty segment is removed only then. A cached object names its segment and
 * offset (NULL and 0: a file of its own). */
static const char schema_1014[] =
    "CREATE TABLE cache_segments ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  instance TEXT NOT NULL DEFAULT '',"
    "  created REAL NOT NULL,"
    "  sealed INTEGER NOT NULL DEFAULT 0"
    ");"
    "ALTER TABLE cache ADD COLUMN segment INTEGER;"
    "ALTER TABLE cache ADD COLUMN file_offset INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX cache_by_segment ON cache(segment, file_offset) WHERE segment IS NOT NULL;";

/* Version 1.15: the cache's usage kept as running totals, so that reading
 * it (each shared instance before each reservation; the metrics) reads a
 * row instead of scanning `cache`: count(*) and sum(size) over 1,000,000
 * rows took 240-248 ms on PostgreSQL (BENCHMARKS.md). Triggers on `cache`
 * see every change, whoever makes it (commits, evictions, recovery, the
 * deletions that cascade from `objects`), in the changing transaction.
 * The usage is the row plus the changes not yet folded into it
 * (CATALOG_CACHE_USAGE_SQL). SQLite updates the row in place: its writers
 * take turns anyway. PostgreSQL appends a change per row instead: every
 * batch updating one row would queue the instances' batches on its lock,
 * and a row updated N times in one transaction leaves a chain of N
 * versions that each update walks (4,096 inserts took 215 ms instead of
 * 6 ms, against 30 ms appending); a reader folds them into the row
 * (cache_load_totals). The triggers exist before the row is filled, so a
 * concurrent writer's rows are counted by one or the other. */
static const char schema_1015[] =
    "CREATE TABLE cache_usage ("
    "  id INTEGER PRIMARY KEY CHECK (id = 0),"
    "  objects INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL"
    ");"
    "CREATE TABLE cache_usage_changes ("
    "  objects INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL"
    ");";
#define SCHEMA_1015_FILL \
    "INSERT INTO cache_usage SELECT 0, count(*), coalesce(sum(size), 0) FROM cache;"
static const char schema_1015_sqlite[] =
    "CREATE TRIGGER cache_usage_insert AFTER INSERT ON cache BEGIN"
    "  UPDATE cache_usage SET objects = objects + 1, bytes = bytes + NEW.size;"
    " END;"
    "CREATE TRIGGER cache_usage_delete AFTER DELETE ON cache BEGIN"
    "  UPDATE cache_usage SET objects = objects - 1, bytes = bytes - OLD.size;"
    " END;"
    "CREATE TRIGGER cache_usage_resize AFTER UPDATE OF size ON cache BEGIN"
    "  UPDATE cache_usage SET bytes = bytes + NEW.size - OLD.size;"
    " END;"
    SCHEMA_1015_FILL;
static const char schema_1015_postgres[] =
    "CREATE FUNCTION cache_usage_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  IF TG_OP = 'INSERT' THEN"
    "   INSERT INTO cache_usage_changes VALUES (1, NEW.size);"
    "  ELSIF TG_OP = 'DELETE' THEN"
    "   INSERT INTO cache_usage_changes VALUES (-1, -OLD.size);"
    "  ELSIF NEW.size <> OLD.size THEN"
    "   INSERT INTO cache_usage_changes VALUES (0, NEW.size - OLD.size);"
    "  END IF;"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER cache_usage_change AFTER INSERT OR DELETE OR UPDATE OF size ON cache"
    "  FOR EACH ROW EXECUTE FUNCTION cache_usage_change();"
    SCHEMA_1015_FILL;

/* Version 1.16: what the status page, its sampler and /metrics read on
 * every call, found without reading every request item or pushed file
 * (requests, pushes and their files are kept: a site's grow by a job's
 * files per job). The failed items have an index of their own, holding
 * them only (the other items' changes of state never touch it), with the
 * state so that a count reads the index alone. The latest requests and
 * pushes come off requests_by_created and pushes_by_created, so that a
 * list of them sums their files only (requests_list,
 * catalog_view_recent_pushes). tests/bench/catalog, 1,000,000 items and
 * 100,000 pushed files kept: the metrics 7.8 -> 3.7-4.6 ms on SQLite,
 * 11.7-12.1 -> 10.1-10.6 ms on PostgreSQL; the latest 50 requests 483-507
 * -> 38-40 ms and 2,221-2,327 -> 75-77 ms; the latest 20 pushes 66 -> 1.4
 * ms and 69-74 -> 9 ms (BENCHMARKS.md). */
static const char schema_1016[] =
    "CREATE INDEX request_items_failed ON request_items(state, request_id)"
    " WHERE state = 'FAILED';"
    "CREATE INDEX requests_by_created ON requests(created, id);"
    "CREATE INDEX pushes_by_created ON pushes(created, id);";

/* Version 1.17: the files waiting (request items SUBMITTED or STARTED),
 * their bytes, and the started ones kept as running totals, so that the
 * metrics (the status page, its sampler, /metrics) read a row instead of
 * every waiting item: a 1,000,000-file request made each call 0.30-0.35 s
 * on SQLite (BENCHMARKS.md). Kept as the cache's usage is (1.15): triggers
 * on `request_items`, whoever changes them; SQLite updates the row in
 * place, PostgreSQL appends a change per item that readers and the
 * requests' upkeep fold (catalog_fold_totals). An object's size is read
 * only when an item starts or stops waiting (a start reads none): these
 * triggers run per item on the recall path. A waiting item's request is
 * active (an ending request cancels its waiting items first,
 * requests_end_found), and an object's size never changes once recorded,
 * so the totals are the old query's, with neither join. The cache's usage
 * keeps its pinned objects and bytes too (a scan of `cache` for pins > 0,
 * 73-77 ms at 500,000 pinned on SQLite, under the cache's lock): its
 * triggers count a row when its pins leave or reach zero, not at each pin. */
static const char schema_1017[] =
    "CREATE TABLE request_item_totals ("
    "  id INTEGER PRIMARY KEY CHECK (id = 0),"
    "  waiting_files INTEGER NOT NULL,"
    "  waiting_bytes INTEGER NOT NULL,"
    "  started_files INTEGER NOT NULL"
    ");"
    "CREATE TABLE request_item_total_changes ("
    "  waiting_files INTEGER NOT NULL,"
    "  waiting_bytes INTEGER NOT NULL,"
    "  started_files INTEGER NOT NULL"
    ");"
    "ALTER TABLE cache_usage ADD COLUMN pinned_objects INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE cache_usage ADD COLUMN pinned_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE cache_usage_changes ADD COLUMN pinned_objects INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE cache_usage_changes ADD COLUMN pinned_bytes INTEGER NOT NULL DEFAULT 0;";
#define WAITING(row) row ".state IN ('SUBMITTED', 'STARTED')"
#define ITEM_SIZE(row) "coalesce((SELECT size FROM objects WHERE id = " row ".object_id), 0)"
#define PINNED(row) "(CASE WHEN " row ".pins > 0 THEN 1 ELSE 0 END)"
#define SCHEMA_1017_FILL                                                                    \
    "INSERT INTO request_item_totals SELECT 0, count(*), coalesce(sum(o.size), 0),"        \
    " coalesce(sum(CASE WHEN i.state = 'STARTED' THEN 1 ELSE 0 END), 0)"                  \
    " FROM request_items i JOIN objects o ON o.id = i.object_id WHERE " WAITING("i") ";"  \
    "UPDATE cache_usage SET pinned_objects = (SELECT count(*) FROM cache WHERE pins > 0),"  \
    " pinned_bytes = (SELECT coalesce(sum(size), 0) FROM cache WHERE pins > 0);"
static const char schema_1017_sqlite[] =
    "CREATE TRIGGER request_item_totals_insert AFTER INSERT ON request_items"
    " WHEN " WAITING("NEW") " BEGIN"
    "  UPDATE request_item_totals SET waiting_files = waiting_files + 1,"
    "   waiting_bytes = waiting_bytes + " ITEM_SIZE("NEW") ","
    "   started_files = started_files + (NEW.state = 'STARTED');"
    " END;"
    "CREATE TRIGGER request_item_totals_delete AFTER DELETE ON request_items"
    " WHEN " WAITING("OLD") " BEGIN"
    "  UPDATE request_item_totals SET waiting_files = waiting_files - 1,"
    "   waiting_bytes = waiting_bytes - " ITEM_SIZE("OLD") ","
    "   started_files = started_files - (OLD.state = 'STARTED');"
    " END;"
    "CREATE TRIGGER request_item_totals_update AFTER UPDATE OF state, object_id ON request_items"
    " WHEN (OLD.state IS NOT NEW.state OR OLD.object_id IS NOT NEW.object_id)"
    "  AND (" WAITING("OLD") " OR " WAITING("NEW") ")"
    " BEGIN"
    "  UPDATE request_item_totals SET"
    "   waiting_files = waiting_files + (" WAITING("NEW") ") - (" WAITING("OLD") "),"
    "   waiting_bytes = waiting_bytes + CASE"
    "    WHEN (" WAITING("NEW") ") = (" WAITING("OLD") ") AND NEW.object_id = OLD.object_id"
    "    THEN 0"
    "    ELSE (CASE WHEN " WAITING("NEW") " THEN " ITEM_SIZE("NEW") " ELSE 0 END)"
    "     - (CASE WHEN " WAITING("OLD") " THEN " ITEM_SIZE("OLD") " ELSE 0 END) END,"
    "   started_files = started_files + (NEW.state = 'STARTED') - (OLD.state = 'STARTED');"
    " END;"
    "DROP TRIGGER cache_usage_insert;"
    "DROP TRIGGER cache_usage_delete;"
    "DROP TRIGGER cache_usage_resize;"
    "CREATE TRIGGER cache_usage_insert AFTER INSERT ON cache BEGIN"
    "  UPDATE cache_usage SET objects = objects + 1, bytes = bytes + NEW.size,"
    "   pinned_objects = pinned_objects + " PINNED("NEW") ","
    "   pinned_bytes = pinned_bytes + " PINNED("NEW") " * NEW.size;"
    " END;"
    "CREATE TRIGGER cache_usage_delete AFTER DELETE ON cache BEGIN"
    "  UPDATE cache_usage SET objects = objects - 1, bytes = bytes - OLD.size,"
    "   pinned_objects = pinned_objects - " PINNED("OLD") ","
    "   pinned_bytes = pinned_bytes - " PINNED("OLD") " * OLD.size;"
    " END;"
    "CREATE TRIGGER cache_usage_update AFTER UPDATE OF size, pins ON cache"
    " WHEN NEW.size <> OLD.size OR " PINNED("NEW") " <> " PINNED("OLD") " BEGIN"
    "  UPDATE cache_usage SET bytes = bytes + NEW.size - OLD.size,"
    "   pinned_objects = pinned_objects + " PINNED("NEW") " - " PINNED("OLD") ","
    "   pinned_bytes = pinned_bytes + " PINNED("NEW") " * NEW.size - " PINNED("OLD") " * OLD.size;"
    " END;"
    SCHEMA_1017_FILL;
static const char schema_1017_postgres[] =
    "CREATE FUNCTION request_item_totals_change() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE waited BOOLEAN := false; waits BOOLEAN := false; bytes BIGINT := 0; started BIGINT := 0;"
    " BEGIN"
    "  IF TG_OP <> 'INSERT' THEN"
    "   waited := " WAITING("OLD") "; started := started - (OLD.state = 'STARTED')::INT;"
    "  END IF;"
    "  IF TG_OP <> 'DELETE' THEN"
    "   waits := " WAITING("NEW") "; started := started + (NEW.state = 'STARTED')::INT;"
    "  END IF;"
    "  IF waited AND NOT (waits AND NEW.object_id = OLD.object_id) THEN"
    "   bytes := bytes - " ITEM_SIZE("OLD") ";"
    "  END IF;"
    "  IF waits AND NOT (waited AND NEW.object_id = OLD.object_id) THEN"
    "   bytes := bytes + " ITEM_SIZE("NEW") ";"
    "  END IF;"
    "  INSERT INTO request_item_total_changes VALUES (waits::INT - waited::INT, bytes, started);"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER request_item_totals_insert AFTER INSERT ON request_items FOR EACH ROW"
    " WHEN (" WAITING("NEW") ") EXECUTE FUNCTION request_item_totals_change();"
    "CREATE TRIGGER request_item_totals_delete AFTER DELETE ON request_items FOR EACH ROW"
    " WHEN (" WAITING("OLD") ") EXECUTE FUNCTION request_item_totals_change();"
    "CREATE TRIGGER request_item_totals_update AFTER UPDATE OF state, object_id ON request_items"
    " FOR EACH ROW WHEN ((OLD.state IS DISTINCT FROM NEW.state"
    "  OR OLD.object_id IS DISTINCT FROM NEW.object_id)"
    "  AND (" WAITING("OLD") " OR " WAITING("NEW") "))"
    " EXECUTE FUNCTION request_item_totals_change();"
    "CREATE OR REPLACE FUNCTION cache_usage_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  IF TG_OP = 'INSERT' THEN"
    "   INSERT INTO cache_usage_changes VALUES (1, NEW.size, " PINNED("NEW") ","
    "    " PINNED("NEW") " * NEW.size);"
    "  ELSIF TG_OP = 'DELETE' THEN"
    "   INSERT INTO cache_usage_changes VALUES (-1, -OLD.size, -" PINNED("OLD") ","
    "    -" PINNED("OLD") " * OLD.size);"
    "  ELSE"
    "   INSERT INTO cache_usage_changes VALUES (0, NEW.size - OLD.size,"
    "    " PINNED("NEW") " - " PINNED("OLD") ","
    "    " PINNED("NEW") " * NEW.size - " PINNED("OLD") " * OLD.size);"
    "  END IF;"
    "  RETURN NULL; END $$;"
    "DROP TRIGGER cache_usage_change ON cache;"
    "CREATE TRIGGER cache_usage_change AFTER INSERT OR DELETE ON cache"
    "  FOR EACH ROW EXECUTE FUNCTION cache_usage_change();"
    /* a pin that leaves the count as it was (1 -> 2) runs no function */
    "CREATE TRIGGER cache_usage_update AFTER UPDATE OF size, pins ON cache FOR EACH ROW"
    "  WHEN (NEW.size <> OLD.size OR " PINNED("NEW") " <> " PINNED("OLD") ")"
    "  EXECUTE FUNCTION cache_usage_change();"
    SCHEMA_1017_FILL;

/* Version 1.18: the push metrics' counts kept as running totals, as the
 * waiting items' are (1.17): the files RECEIVED and their bytes, and the
 * ARCHIVING, DURABLE and FAILED files, by triggers on `push_items`. The
 * metrics (/metrics, the status page and its sampler) counted every file
 * ever pushed from an index on each call: 16-17 ms at 100,000 files on
 * PostgreSQL, growing with each checkpoint (BENCHMARKS.md). */
#define PUSH_TOTALS_COLUMNS                                                                  \
    "  received_files INTEGER NOT NULL, received_bytes INTEGER NOT NULL,"                   \
    "  archiving_files INTEGER NOT NULL, durable_files INTEGER NOT NULL,"                   \
    "  failed_files INTEGER NOT NULL"
static const char schema_1018[] =
    "CREATE TABLE push_item_totals (id INTEGER PRIMARY KEY CHECK (id = 0)," PUSH_TOTALS_COLUMNS ");"
    "CREATE TABLE push_item_total_changes (" PUSH_TOTALS_COLUMNS ");"
    "INSERT INTO push_item_totals SELECT 0,"
    " coalesce(sum(CASE WHEN i.state = 'RECEIVED' THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN i.state = 'RECEIVED' THEN o.size ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN i.state = 'ARCHIVING' THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN i.state = 'DURABLE' THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN i.state = 'FAILED' THEN 1 ELSE 0 END), 0)"
    " FROM push_items i LEFT JOIN objects o ON o.id = i.object_id;";
#define PUSH_COUNTED(row) row ".state IN ('RECEIVED', 'ARCHIVING', 'DURABLE', 'FAILED')"
#define PUSH_IS(row, state) "(CASE WHEN " row ".state = '" state "' THEN 1 ELSE 0 END)"
#define PUSH_RECEIVED_BYTES(row) "(CASE WHEN " row ".state = 'RECEIVED' THEN " ITEM_SIZE(row) " ELSE 0 END)"
/* the kept columns' values for one row: the row's own counts (a_op row_a),
 * less another's (b_op row_b) for an update */
#define PUSH_TOTALS_DELTA(a_op, row_a, b_op, row_b)                                                  \
    " received_files = received_files " a_op " " PUSH_IS(row_a, "RECEIVED")                            \
    " " b_op " " PUSH_IS(row_b, "RECEIVED") ","                                                        \
    " received_bytes = received_bytes " a_op " " PUSH_RECEIVED_BYTES(row_a)                            \
    " " b_op " " PUSH_RECEIVED_BYTES(row_b) ","                                                        \
    " archiving_files = archiving_files " a_op " " PUSH_IS(row_a, "ARCHIVING")                         \
    " " b_op " " PUSH_IS(row_b, "ARCHIVING") ","                                                       \
    " durable_files = durable_files " a_op " " PUSH_IS(row_a, "DURABLE")                               \
    " " b_op " " PUSH_IS(row_b, "DURABLE") ","                                                         \
    " failed_files = failed_files " a_op " " PUSH_IS(row_a, "FAILED")                                  \
    " " b_op " " PUSH_IS(row_b, "FAILED")
static const char schema_1018_sqlite[] =
    "CREATE TRIGGER push_item_totals_insert AFTER INSERT ON push_items"
    " WHEN " PUSH_COUNTED("NEW") " BEGIN"
    "  UPDATE push_item_totals SET" PUSH_TOTALS_DELTA("+", "NEW", "+ 0 *", "NEW") ";"
    " END;"
    "CREATE TRIGGER push_item_totals_delete AFTER DELETE ON push_items"
    " WHEN " PUSH_COUNTED("OLD") " BEGIN"
    "  UPDATE push_item_totals SET" PUSH_TOTALS_DELTA("-", "OLD", "+ 0 *", "OLD") ";"
    " END;"
    "CREATE TRIGGER push_item_totals_update AFTER UPDATE OF state, object_id ON push_items"
    " WHEN (OLD.state IS NOT NEW.state OR OLD.object_id IS NOT NEW.object_id)"
    "  AND (" PUSH_COUNTED("OLD") " OR " PUSH_COUNTED("NEW") ")"
    " BEGIN"
    "  UPDATE push_item_totals SET" PUSH_TOTALS_DELTA("+", "NEW", "-", "OLD") ";"
    " END;";
/* PostgreSQL appends a change per counted file, as for the waiting items */
static const char schema_1018_postgres[] =
    "CREATE FUNCTION push_item_totals_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    "  IF TG_OP = 'INSERT' THEN"
    "   INSERT INTO push_item_total_changes SELECT " PUSH_IS("NEW", "RECEIVED") ","
    "    " PUSH_RECEIVED_BYTES("NEW") ", " PUSH_IS("NEW", "ARCHIVING") ","
    "    " PUSH_IS("NEW", "DURABLE") ", " PUSH_IS("NEW", "FAILED") ";"
    "  ELSIF TG_OP = 'DELETE' THEN"
    "   INSERT INTO push_item_total_changes SELECT -" PUSH_IS("OLD", "RECEIVED") ","
    "    -" PUSH_RECEIVED_BYTES("OLD") ", -" PUSH_IS("OLD", "ARCHIVING") ","
    "    -" PUSH_IS("OLD", "DURABLE") ", -" PUSH_IS("OLD", "FAILED") ";"
    "  ELSE"
    "   INSERT INTO push_item_total_changes SELECT"
    "    " PUSH_IS("NEW", "RECEIVED") " - " PUSH_IS("OLD", "RECEIVED") ","
    "    " PUSH_RECEIVED_BYTES("NEW") " - " PUSH_RECEIVED_BYTES("OLD") ","
    "    " PUSH_IS("NEW", "ARCHIVING") " - " PUSH_IS("OLD", "ARCHIVING") ","
    "    " PUSH_IS("NEW", "DURABLE") " - " PUSH_IS("OLD", "DURABLE") ","
    "    " PUSH_IS("NEW", "FAILED") " - " PUSH_IS("OLD", "FAILED") ";"
    "  END IF;"
    "  RETURN NULL; END $$;"
    "CREATE TRIGGER push_item_totals_insert AFTER INSERT ON push_items FOR EACH ROW"
    " WHEN (" PUSH_COUNTED("NEW") ") EXECUTE FUNCTION push_item_totals_change();"
    "CREATE TRIGGER push_item_totals_delete AFTER DELETE ON push_items FOR EACH ROW"
    " WHEN (" PUSH_COUNTED("OLD") ") EXECUTE FUNCTION push_item_totals_change();"
    "CREATE TRIGGER push_item_totals_update AFTER UPDATE OF state, object_id ON push_items"
    " FOR EACH ROW WHEN ((OLD.state IS DISTINCT FROM NEW.state"
    "  OR OLD.object_id IS DISTINCT FROM NEW.object_id)"
    "  AND (" PUSH_COUNTED("OLD") " OR " PUSH_COUNTED("NEW") "))"
    " EXECUTE FUNCTION push_item_totals_change();";

static const catalog_schema_step_t steps[] = {
    {1000, schema_1000, schema_1000_sqlite, schema_1000_postgres},
    {1001, schema_1001, NULL, NULL},
    {1002, schema_1002, schema_1002_sqlite, schema_1002_postgres},
    {1003, schema_1003, schema_1003_sqlite, schema_1003_postgres},
    {1004, schema_1004, schema_1004_sqlite, schema_1004_postgres},
    {1005, schema_1005, NULL, NULL},
    {1006, schema_1006, NULL, NULL},
    {CATALOG_SITE_VERSION, schema_1007, NULL, NULL},
    {CATALOG_INSTANCES_VERSION, schema_1008, NULL, NULL},
    {1009, NULL, NULL, schema_1009_postgres},
    {1010, schema_1010, NULL, NULL},
    {1011, NULL, NULL, schema_1011_postgres},
    {1012, schema_1012, NULL, NULL},
    {1013, NULL, NULL, schema_1013_postgres},
    {1014, schema_1014, NULL, NULL},
    {1015, schema_1015, schema_1015_sqlite, schema_1015_postgres},
    {1016, schema_1016, NULL, NULL},
    {1017, schema_1017, schema_1017_sqlite, schema_1017_postgres},
    {1018, schema_1018, schema_1018_sqlite, schema_1018_postgres},
    {1019, NULL, NULL, schema_1019_postgres},
};

const catalog_schema_step_t *catalog_schema_steps(size_t *count)
{
    *count = sizeof(steps) / sizeof(steps[0]);
    return steps;
}
