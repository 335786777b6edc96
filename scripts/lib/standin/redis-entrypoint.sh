#!/bin/sh
# Entrypoint of the stand-in `redis` image scripts/compose-check builds from Debian's
# packages when no image registry answers. Like the official image, it turns protected
# mode off: the container's port is reachable only where it is published or networked.
set -eu
if [ "${1:-}" = redis-server ]; then
  shift
  exec redis-server --protected-mode no "$@"
fi
exec "$@"
