# Makes sure a PostgreSQL and a Redis answer, for the test suite and the local cluster.
#
# Use the ones named by DATABASE_URL / REDIS_URL (or the local defaults) when they answer;
# otherwise start private instances from the installed binaries under $PROBACTR_STATE;
# otherwise, when root, install them with apt-get; otherwise say what to install.
# Source this file, then call ensure_postgres and ensure_redis.

: "${PROBACTR_STATE:=$PWD/.probactr}"
: "${DATABASE_URL:=postgres://postgres@127.0.0.1:5432/postgres}"
: "${REDIS_URL:=redis://127.0.0.1:6379}"
export DATABASE_URL REDIS_URL PROBACTR_STATE

say() { printf '[services] %s\n' "$*" >&2; }

pg_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  return 1
}

postgres_answers() {
  command -v psql >/dev/null 2>&1 || return 1
  psql "$1" -XAtqc 'SELECT 1' >/dev/null 2>&1
}

redis_answers() {
  command -v redis-cli >/dev/null 2>&1 || return 1
  [ "$(redis-cli -u "$1" ping 2>/dev/null)" = "PONG" ]
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    return 0
  fi
  return 1
}

# Runs a command as the postgres user when we are root (initdb refuses root).
as_pg_user() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start_private_postgres() {
  local bindir dir port
  bindir=$(pg_bindir) || return 1
  dir="$PROBACTR_STATE/postgres"
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown -R postgres "$PROBACTR_STATE/postgres"
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg_user "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  port=$(cat "$dir/port" 2>/dev/null || free_port)
  echo "$port" > "$dir/port"
  as_pg_user "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null
  DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
  say "started a private PostgreSQL on port $port (data in $dir)"
}

ensure_postgres() {
  if postgres_answers "$DATABASE_URL"; then
    say "using PostgreSQL at $DATABASE_URL"
    return 0
  fi
  if [ -f "$PROBACTR_STATE/postgres/port" ]; then
    local url="postgres://postgres@127.0.0.1:$(cat "$PROBACTR_STATE/postgres/port")/postgres"
    if postgres_answers "$url"; then DATABASE_URL=$url; say "using private PostgreSQL at $url"; return 0; fi
  fi
  if ! pg_bindir >/dev/null || ! command -v psql >/dev/null; then
    apt_install postgresql postgresql-client || {
      say "PostgreSQL does not answer at $DATABASE_URL and is not installed: install postgresql (e.g. apt-get install postgresql) or set DATABASE_URL"
      return 1
    }
  fi
  start_private_postgres || { say "could not start a private PostgreSQL"; return 1; }
  postgres_answers "$DATABASE_URL" || { say "private PostgreSQL does not answer"; return 1; }
}

ensure_redis() {
  if redis_answers "$REDIS_URL"; then
    say "using Redis at $REDIS_URL"
    return 0
  fi
  local dir="$PROBACTR_STATE/redis" port
  if [ -f "$dir/port" ] && redis_answers "redis://127.0.0.1:$(cat "$dir/port")"; then
    REDIS_URL="redis://127.0.0.1:$(cat "$dir/port")"; say "using private Redis at $REDIS_URL"; return 0
  fi
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    apt_install redis-server || {
      say "Redis does not answer at $REDIS_URL and is not installed: install redis-server or set REDIS_URL"
      return 1
    }
  fi
  mkdir -p "$dir"
  port=$(free_port)
  echo "$port" > "$dir/port"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir "$dir" --logfile "$dir/log" --pidfile "$dir/pid" >/dev/null
  REDIS_URL="redis://127.0.0.1:$port"
  for _ in $(seq 50); do redis_answers "$REDIS_URL" && break; sleep 0.1; done
  redis_answers "$REDIS_URL" || { say "private Redis does not answer"; return 1; }
  say "started a private Redis on port $port"
}
