#!/usr/bin/env bash
# A throw-away PostgreSQL server on 127.0.0.1 for the distributed tests and the bank's PostgreSQL
# backend. Debian's packages; never listens on anything but loopback.
#
#   eval "$(tests/distributed/pg_server.sh start DIR)"   # prints `export INFRARSI_TEST_PG_URL=…`
#   tests/distributed/pg_server.sh stop DIR
#
# DIR holds the cluster (created fresh). As root the server runs as the `postgres` user.
set -euo pipefail

cmd=${1:?start|stop}
dir=${2:?cluster directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    # Password auth over TCP; the socket lives in DIR, not /var/run.
    echo "host all all 127.0.0.1/32 scram-sha-256" >"$dir/data/pg_hba.conf"
    echo "local all postgres trust" >>"$dir/data/pg_hba.conf"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off" start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -q -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE infrarsi LOGIN CREATEDB PASSWORD '$password'" \
        -c "CREATE DATABASE infrarsi_test OWNER infrarsi" >/dev/null
    echo "export INFRARSI_TEST_PG_URL=postgresql+psycopg://infrarsi:$password@127.0.0.1:$port/infrarsi_test"
    ;;
stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
