#!/bin/sh
# Entrypoint of the stand-in `postgres` image scripts/compose-check builds from Debian's
# packages when no image registry answers. It honours what docker-compose.yml uses of the
# official image: POSTGRES_USER, POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE, POSTGRES_DB, the data in
# /var/lib/postgresql/data, and no TCP listener until the first start is initialised
# (so `pg_isready --host` is false while it is).
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    head -n 1 "$POSTGRES_PASSWORD_FILE" > "$pwfile"
  else
    : "${POSTGRES_PASSWORD:?the stand-in postgres image needs POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE}"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  fi
  "$bin/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" -E UTF8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  "$bin/pg_ctl" -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    "$bin/psql" -h /var/run/postgresql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
  fi
  "$bin/pg_ctl" -D "$PGDATA" -w -m fast stop >/dev/null
  echo "stand-in postgres: initialised $PGDATA"
fi

exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' \
  -c unix_socket_directories=/var/run/postgresql "$@"
