# A private PostgreSQL server for tests and benchmarks (source it, or run it:
# sh tests/pg-lib.sh start|stop DIR). initdb + pg_ctl on DIR/pg owned by an
# unprivileged user (PostgreSQL refuses to run as root: nobody, via runuser),
# Unix socket in DIR/pg and no TCP listener, password (SCRAM) authentication.
# start writes DIR/pg-url (the postgres database's URL, no password in it)
# and DIR/pg-password (mode 0600, the caller's: catalog.password_file).
# Packages: postgresql (server), libpq-dev (the catalog's engine).

pg_lib_bin() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

# 0 when a server can be started here; else says why on stderr.
pg_lib_available() {
    bin=$(pg_lib_bin)
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        echo "PostgreSQL server not installed (apt-get install postgresql)" >&2
        return 1
    fi
    if [ "$(id -u)" = 0 ] && ! command -v runuser >/dev/null 2>&1; then
        echo "runuser not found (util-linux): cannot run PostgreSQL as nobody" >&2
        return 1
    fi
    return 0
}

pg_lib_as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

# pg_lib_start DIR [fsync]: fsync off unless asked (tests need no durability);
# PG_LIB_MAX_CONNECTIONS (default 40: several stageind instances want more).
pg_lib_start() {
    dir=$1
    fsync=${2:-off}
    bin=$(pg_lib_bin)
    pg_lib_available || return 1
    mkdir -p "$dir/pg" || return 1
    chmod 711 "$dir"
    password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    (umask 077; printf '%s\n' "$password" >"$dir/pg-password")
    printf '%s\n' "$password" >"$dir/pg/initpw"
    if [ "$(id -u)" = 0 ]; then chown -R nobody: "$dir/pg"; fi
    chmod 700 "$dir/pg"
    if ! pg_lib_as_server "$bin/initdb" -D "$dir/pg/data" -A scram-sha-256 -U stagein \
        --pwfile="$dir/pg/initpw" -N >"$dir/pg-initdb.log" 2>&1; then
        echo "initdb failed: see $dir/pg-initdb.log" >&2
        return 1
    fi
    rm -f "$dir/pg/initpw"
    printf '%s\n' "-k $dir/pg -c listen_addresses= -c fsync=$fsync -c max_connections=${PG_LIB_MAX_CONNECTIONS:-40}" \
        >"$dir/pg-options"
    if ! pg_lib_as_server "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/log" -w \
        -o "$(cat "$dir/pg-options")" start >"$dir/pg-ctl.log" 2>&1; then
        echo "pg_ctl start failed: see $dir/pg-ctl.log and $dir/pg/log" >&2
        return 1
    fi
    echo "postgresql://stagein@/postgres?host=$dir/pg" >"$dir/pg-url"
    pg_lib_watch "$dir" "${PG_LIB_OWNER:-$$}"
}

# pg_lib_setup DIR SKIP_FN: a private server for a system test, or SKIP_FN
# called with why not (package missing, stagein built without libpq, the
# server did not start); SKIP_FN is expected not to return. libpq's own
# password file (PGPASSFILE) is unset: the catalog's password_file serves.
pg_lib_setup() {
    unset PGPASSFILE
    why=$(pg_lib_available 2>&1) || "$2" "$why"
    grep -q 'HAVE_LIBPQ 1' "$top_builddir/config.h" ||
        "$2" "stagein built without the PostgreSQL engine (apt-get install libpq-dev)"
    pg_lib_start "$1" || "$2" "the PostgreSQL server (package postgresql) did not start"
}

# pg_lib_catalog_conf DIR SITE: stagein.conf's catalog group for the server.
pg_lib_catalog_conf() {
    printf 'catalog: { url = "%s";\n    password_file = "%s"; site = "%s"; };' \
        "$(cat "$1/pg-url")" "$1/pg-password" "$2"
}

# A server must not outlive its test, even one killed before its own stop
# ran: a watcher in a session of its own (so a kill of the test's process
# group spares it) stops the server once the owner process is gone.
pg_lib_watch() {
    setsid sh -c '
        while kill -0 "$1" 2>/dev/null && [ -d "$2/pg/data" ]; do sleep 1; done
        [ -d "$2/pg/data" ] || exit 0
        if [ "$(id -u)" = 0 ]; then set -- runuser -u nobody -- "$3/pg_ctl" -D "$2/pg/data"
        else set -- "$3/pg_ctl" -D "$2/pg/data"; fi
        "$@" -m fast -w stop' pg-lib-watch "$2" "$1" "$(pg_lib_bin)" </dev/null >/dev/null 2>&1 &
}

# pg_lib_restart DIR [SECONDS]: cuts every session (fast shutdown) and starts
# the server again, SECONDS later (default 0: pg_ctl restart).
pg_lib_restart() {
    if [ "${2:-0}" = 0 ]; then
        pg_lib_as_server "$(pg_lib_bin)/pg_ctl" -D "$1/pg/data" -m fast -w restart \
            >>"$1/pg-ctl.log" 2>&1
        return
    fi
    pg_lib_stop "$1" || return 1
    sleep "$2"
    pg_lib_resume "$1"
}

# pg_lib_resume DIR: starts a stopped server again, as pg_lib_start did.
pg_lib_resume() {
    pg_lib_as_server "$(pg_lib_bin)/pg_ctl" -D "$1/pg/data" -l "$1/pg/log" -w \
        -o "$(cat "$1/pg-options")" start >>"$1/pg-ctl.log" 2>&1
}

pg_lib_stop() {
    dir=$1
    [ -d "$dir/pg/data" ] || return 0
    pg_lib_as_server "$(pg_lib_bin)/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null 2>&1
}

case "${0##*/}" in
pg-lib.sh)
    case "$1" in
    start) pg_lib_start "$2" "$3" ;;
    stop) pg_lib_stop "$2" ;;
    restart) pg_lib_restart "$2" "$3" ;;
    resume) pg_lib_resume "$2" ;;
    available) pg_lib_available ;;
    *) echo "usage: pg-lib.sh start|stop|resume DIR | restart DIR [SECONDS] | available" >&2; exit 2 ;;
    esac
    ;;
esac
