# probactr's container image: the three binaries (probactr-manager, probactr-executor,
# probactr-monitor), the client and the migrations on debian:bookworm-slim, run as an
# unprivileged user. One image for every service; docker-compose.yml and the Helm chart
# pick the binary by `command`.
#
#   docker build -t probactr:latest .                  (builds the workspace from source)
#   docker compose up -d                                (see README.md, "Deployment with docker compose")
#
# The last stage builds from source. The `prebuilt` stage instead takes binaries built
# on a bookworm (or older glibc) host from the context's prebuilt/ directory, next to
# migrations/: scripts/compose-check uses it in CI, where a release build inside docker
# would take most of the time budget:
#
#   docker build --target prebuilt -f Dockerfile -t probactr:latest CONTEXT_WITH_prebuilt_AND_migrations
#
# Executors start job processes (shell jobs may leave orphans behind): run the image
# under an init that reaps them. docker-compose.yml sets `init: true`; with plain docker
# use `docker run --init`; elsewhere (Kubernetes) start it as `tini -- probactr-executor`
# (tini is installed below).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# --------------------------------------------------------------------- runtime base
# What both ways of getting the binaries share. Listed first, so the classic builder
# (which builds every stage up to its target) builds no compiler for `--target prebuilt`.
FROM debian:${DEBIAN_RELEASE}-slim AS base

LABEL org.opencontainers.image.title="probactr" \
      org.opencontainers.image.description="Distributed job scheduler: manager, executor and monitor" \
      org.opencontainers.image.licenses="Apache-2.0"

# ca-certificates: HTTP jobs over TLS. curl: the compose healthchecks (and handy in
# shell jobs). tini: an init for runtimes without `init: true`. The shell (/bin/sh,
# bash) stays: shell jobs run programs and scripts.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates curl tini; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 probactr; \
    useradd --system --uid 10001 --gid probactr --home-dir /var/lib/probactr \
        --create-home --shell /usr/sbin/nologin probactr

# The binaries embed the migrations (the manager applies them at start); the files are
# shipped too, for operators who review or apply them by hand.
COPY migrations /usr/share/probactr/migrations

# In a container the manager must listen beyond loopback to be reachable at all.
ENV PROBACTR_MANAGER_LISTEN=0.0.0.0:8080
EXPOSE 8080
WORKDIR /var/lib/probactr
CMD ["probactr-manager"]

# ------------------------------------------------------------------------- prebuilt
FROM base AS prebuilt
COPY prebuilt/probactr-manager prebuilt/probactr-executor prebuilt/probactr-monitor prebuilt/probactr /usr/local/bin/
RUN set -eux; \
    for bin in probactr-manager probactr-executor probactr-monitor; do \
        "$bin" --version | grep "^$bin "; \
    done
USER 10001:10001

# ---------------------------------------------------------------------------- build
FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /src

# Dependencies first, in their own layer: the manifests, the lock file and placeholder
# sources. This layer is rebuilt only when a Cargo.toml or Cargo.lock changes, so an
# edit of probactr's own code recompiles probactr only. Every workspace member must be
# listed here and below (common/tests/deployment.rs checks it against Cargo.toml).
COPY Cargo.toml Cargo.lock ./
COPY common/Cargo.toml common/Cargo.toml
COPY definitions/Cargo.toml definitions/Cargo.toml
COPY executor/Cargo.toml executor/Cargo.toml
COPY monitor/Cargo.toml monitor/Cargo.toml
COPY manager/Cargo.toml manager/Cargo.toml
COPY cli/Cargo.toml cli/Cargo.toml
COPY bench/Cargo.toml bench/Cargo.toml
COPY testkit/Cargo.toml testkit/Cargo.toml
ARG PACKAGES="-p probactr-manager -p probactr-executor -p probactr-monitor -p probactr-cli"
RUN set -eux; \
    for crate in common definitions executor monitor manager cli bench testkit; do \
        mkdir -p "$crate/src"; \
        echo '//! placeholder for the dependency layer' > "$crate/src/lib.rs"; \
        echo 'fn main() {}' > "$crate/src/main.rs"; \
    done; \
    cargo build --release --locked $PACKAGES; \
    rm -rf common/src definitions/src executor/src monitor/src manager/src cli/src bench/src testkit/src

# Then probactr itself. COPY keeps the files' own modification times, which can be
# older than the placeholders built above: touch them so cargo rebuilds every crate.
# The store's SQL is checked against the query descriptions in .sqlx/, not a database
# (.cargo/config.toml sets SQLX_OFFLINE).
COPY .cargo .cargo
COPY .sqlx .sqlx
COPY migrations migrations
COPY common common
COPY definitions definitions
COPY executor executor
COPY monitor monitor
COPY manager manager
COPY cli cli
COPY bench bench
COPY testkit testkit
RUN set -eux; \
    find common definitions executor monitor manager cli bench testkit -name '*.rs' -exec touch {} +; \
    cargo build --release --locked $PACKAGES; \
    for bin in probactr-manager probactr-executor probactr-monitor; do \
        "target/release/$bin" --version | grep "^$bin "; \
    done

# -------------------------------------------------------------------------- runtime
# The default target: the base with the binaries built from source above.
FROM base AS runtime
COPY --from=build /src/target/release/probactr-manager /usr/local/bin/probactr-manager
COPY --from=build /src/target/release/probactr-executor /usr/local/bin/probactr-executor
COPY --from=build /src/target/release/probactr-monitor /usr/local/bin/probactr-monitor
COPY --from=build /src/target/release/probactr /usr/local/bin/probactr
USER 10001:10001
