# Migrates a database the way start-up does (`store::migrate`), with psql: for scripts
# that need a migrated scratch database without building probactr. Source this file.

# Every file of migrations/ in version order (the number before the first underscore,
# as sqlx orders them), each in its own transaction.
apply_migrations() {
  local url=$1 migration
  for migration in $(ls migrations/*.sql | sed 's|^migrations/||' | sort -t_ -k1,1n); do
    psql -XAtq -v ON_ERROR_STOP=1 -1 -f "migrations/$migration" "$url" >/dev/null
  done
}

# Every database function of `common/src/store/functions.rs`'s FUNCTIONS, in its order,
# in one transaction (what `store::functions::install` does).
apply_functions() {
  local url=$1 functions file
  functions=$(grep -oE 'function!\("[^"]+"\)' common/src/store/functions.rs | sed -E 's/function!\("(.*)"\)/\1/')
  [ -n "$functions" ] || { echo "no database functions found in common/src/store/functions.rs" >&2; return 1; }
  {
    echo 'BEGIN;'
    for file in $functions; do cat "common/src/store/$file"; echo; done
    echo 'COMMIT;'
  } | psql -XAtq -v ON_ERROR_STOP=1 "$url" >/dev/null
}
