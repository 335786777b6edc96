# Base images for scripts/compose-check: the tags the Dockerfile and docker-compose.yml
# use, pulled when a registry answers, otherwise built as stand-ins from the Debian
# distribution's packages with mmdebstrap (no registry needed, only a Debian mirror).
# Source this file, then call ensure_image TAG.

STANDIN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/standin"
: "${STANDIN_SUITE:=bookworm}"
: "${STANDIN_PULL_TIMEOUT:=60}"

standin_say() { printf '[images] %s\n' "$*" >&2; }

# One rootfs tarball per package set, made once and kept while this shell lives.
standin_rootfs() {
  local name=$1 include=$2 out
  out="$STANDIN_WORK/$name.tar"
  if [ ! -s "$out" ]; then
    command -v mmdebstrap >/dev/null 2>&1 || {
      standin_say "mmdebstrap is missing (apt-get install mmdebstrap): cannot build stand-in images"
      return 1
    }
    standin_say "building a $STANDIN_SUITE rootfs ($name${include:+: $include}) with mmdebstrap"
    mmdebstrap --variant=minbase --format=tar --quiet ${include:+--include="$include"} \
      --customize-hook="upload $STANDIN_DIR/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh" \
      --customize-hook="upload $STANDIN_DIR/redis-entrypoint.sh /usr/local/bin/redis-entrypoint.sh" \
      --customize-hook='chmod 755 "$1/usr/local/bin/postgres-entrypoint.sh" "$1/usr/local/bin/redis-entrypoint.sh"' \
      "$STANDIN_SUITE" "$out.part" >&2 || return 1
    mv "$out.part" "$out"
  fi
  echo "$out"
}

standin_build() {
  local tag=$1 rootfs
  case "$tag" in
    debian:*)
      rootfs=$(standin_rootfs debian "") || return 1
      docker import --change 'CMD ["bash"]' "$rootfs" "$tag" >/dev/null || return 1
      ;;
    postgres:*)
      rootfs=$(standin_rootfs services "postgresql,postgresql-client,redis-server,ca-certificates") || return 1
      docker import \
        --change 'ENV PGDATA=/var/lib/postgresql/data' \
        --change 'VOLUME /var/lib/postgresql/data' \
        --change 'EXPOSE 5432' \
        --change 'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]' \
        --change 'CMD []' \
        "$rootfs" "$tag" >/dev/null || return 1
      ;;
    redis:*)
      rootfs=$(standin_rootfs services "postgresql,postgresql-client,redis-server,ca-certificates") || return 1
      docker import \
        --change 'WORKDIR /data' \
        --change 'EXPOSE 6379' \
        --change 'ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]' \
        --change 'CMD ["redis-server"]' \
        "$rootfs" "$tag" >/dev/null || return 1
      ;;
    *)
      standin_say "no stand-in for $tag (it needs a registry, or build it yourself under that tag)"
      return 1
      ;;
  esac
  standin_say "built stand-in $tag from $STANDIN_SUITE packages"
}

# Makes sure the image TAG exists locally: present, pulled, or built as a stand-in.
ensure_image() {
  local tag=$1
  docker image inspect "$tag" >/dev/null 2>&1 && return 0
  if timeout "$STANDIN_PULL_TIMEOUT" docker pull --quiet "$tag" >/dev/null 2>&1; then
    standin_say "pulled $tag"
    return 0
  fi
  standin_say "cannot pull $tag: building a stand-in"
  : "${STANDIN_WORK:=$(mktemp -d)}"
  standin_build "$tag"
}
