//! The catalogue of the variables probactr reads: each declared once, with its default
//! and meaning (the README's configuration table and `.env.example` are checked against it).

/// One environment variable probactr reads.
#[derive(Debug, Clone, Copy)]
pub struct Var {
    /// The variable's name.
    pub name: &'static str,
    /// Its value when unset (empty: no default, the feature is off or the value required).
    pub default: &'static str,
    /// What it means, in one line.
    pub help: &'static str,
}

/// Every variable any probactr process reads.
pub const VARS: &[Var] = &[
    Var {
        name: "DATABASE_URL",
        default: "postgres://postgres@127.0.0.1:5432/probactr",
        help: "PostgreSQL connection URL (the source of truth)",
    },
    Var {
        name: "DATABASE_READ_URL",
        default: "",
        help: "a streaming replica of DATABASE_URL the manager reads lists, run pages, output and the dashboard from (unset: every read goes to the primary)",
    },
    Var {
        name: "PROBACTR_READ_MAX_LAG",
        default: "5s",
        help: "how far behind the primary DATABASE_READ_URL may be before the manager reads from the primary instead",
    },
    Var {
        name: "REDIS_URL",
        default: "redis://127.0.0.1:6379",
        help: "Redis connection URL (locks and permits)",
    },
    Var {
        name: "PROBACTR_REDIS_PREFIX",
        default: "probactr:",
        help: "prefix of every Redis key, so clusters can share a Redis",
    },
    Var {
        name: "PROBACTR_DB_POOL_SIZE",
        default: "10",
        help: "PostgreSQL connections a process shares among its work (its busiest loops, heartbeats and the listener keep their own beside them)",
    },
    Var {
        name: "PROBACTR_CONNECT_TIMEOUT",
        default: "60s",
        help: "at start-up, how long a process retries PostgreSQL and Redis (executors, monitors; the manager PostgreSQL) before it exits naming the one that does not answer",
    },
    Var {
        name: "PROBACTR_HEARTBEAT_INTERVAL",
        default: "5s",
        help: "how often executors and monitors heartbeat",
    },
    Var {
        name: "PROBACTR_HEARTBEAT_TIMEOUT",
        default: "15s",
        help: "silence after which a monitor declares a process dead; must exceed the interval",
    },
    Var {
        name: "PROBACTR_REAP_INTERVAL",
        default: "5s",
        help: "how often monitors look for dead executors and stuck runs",
    },
    Var {
        name: "PROBACTR_LOCK_LEASE",
        default: "30s",
        help: "lease of a job's Redis lock or permit; renewed every lease/3",
    },
    Var {
        name: "PROBACTR_LOCK_START_BUDGET",
        default: "2s",
        help: "how long an executor retries a busy lock before applying the overlap policy",
    },
    Var {
        name: "PROBACTR_LOCK_RETRY",
        default: "jitter:20ms:500ms",
        help:
            "how a busy lock is retried: jitter:BASE:CAP (full jitter) or fixed:DELAY (only to show why not)",
    },
    Var {
        name: "PROBACTR_EXECUTOR_CAPACITY",
        default: "1024",
        help: "runs one executor executes at once (noop, sleep and HTTP jobs run inside the executor)",
    },
    Var {
        name: "PROBACTR_EXECUTOR_PROCESSES",
        default: "16",
        help: "of those, shell jobs (each a process) one executor runs at once",
    },
    Var {
        name: "PROBACTR_EXECUTOR_PREFETCH",
        default: "2048",
        help: "runs an executor claims ahead of its free slots and starts as slots free (only lock-free in-process runs bound by no quota, cap or rate; 0: none)",
    },
    Var {
        name: "PROBACTR_EXECUTOR_LABELS",
        default: "",
        help: "labels of an executor, name=value,name=value (zone=a,gpu=1): jobs with a selector run only on executors carrying all of its labels",
    },
    Var {
        name: "PROBACTR_EXECUTOR_NAMESPACES",
        default: "",
        help: "namespaces an executor is dedicated to, a,b: it claims and starts only runs of jobs in those (empty: every namespace)",
    },
    Var {
        name: "PROBACTR_FIRE_BATCH",
        default: "2000",
        help: "most due triggers an executor fires per transaction (a fire pass starts with half of what the last one fired, at least 500, and doubles the batch after each full one)",
    },
    Var {
        name: "PROBACTR_FIRE_AHEAD",
        default: "500ms",
        help: "how long before their instant runs are fired, waiting until it comes, queued or held by their firer (0s: at the instant; widened up to 1s while fire passes take long)",
    },
    Var {
        name: "PROBACTR_DRAIN_TIMEOUT",
        default: "30s",
        help: "on SIGTERM, how long running jobs may finish before they are stopped",
    },
    Var {
        name: "PROBACTR_RETENTION",
        default: "30d",
        help: "run history older than this is deleted by monitors",
    },
    Var {
        name: "PROBACTR_OUTPUT_LIMIT",
        default: "1MiB",
        help: "how much output a run keeps (bytes, or with KiB/MiB): its first half and its last half, the middle cut",
    },
    Var {
        name: "PROBACTR_OUTPUT_ARCHIVE",
        default: "",
        help: "s3://BUCKET/PREFIX: every run's full output, gzip-compressed, is kept there (endpoint, region and credentials from the AWS_* variables); off when empty",
    },
    Var {
        name: "PROBACTR_OUTPUT_SPOOL",
        default: "",
        help: "where an executor keeps runs' full output until the archive stored it, one directory per executor (`probactr-output-spool` in the system's temporary directory when empty)",
    },
    Var {
        name: "PROBACTR_HTTP_ALLOW",
        default: "",
        help:
            "comma-separated CIDR ranges HTTP jobs may reach even if denied by default (link-local, metadata)",
    },
    Var {
        name: "PROBACTR_HTTP_DENY",
        default: "",
        help: "comma-separated CIDR ranges HTTP jobs may never reach",
    },
    Var {
        name: "PROBACTR_JOB_ENV_PASSTHROUGH",
        default: "",
        help: "comma-separated names (or `PREFIX_*`) of the executor's variables shell jobs inherit beyond PATH, HOME, LANG, LC_*, TZ, TMPDIR and USER",
    },
    Var {
        name: "PROBACTR_JOB_USER",
        default: "",
        help: "the account shell jobs run as, NAME or UID:GID (the executor's own when empty); the executor needs root's SETUID, SETGID, KILL, CHOWN, DAC_OVERRIDE and FOWNER capabilities for it and refuses to start without them",
    },
    Var {
        name: "PROBACTR_JOB_USERS_ALLOWED",
        default: "",
        help: "comma-separated accounts (NAME or UID:GID) a job may name as its own `run_as`",
    },
    Var {
        name: "PROBACTR_WORK_DIR",
        default: "",
        help: "where an executor makes each shell run's fresh working directory, removed after the run (the system's temporary directory when empty)",
    },
    Var {
        name: "PROBACTR_CGROUP",
        default: "auto",
        help: "auto, off, or a cgroup v2 directory delegated to the executor, under which each shell run gets a cgroup of its own, killed whole at the run's end (auto: the executor's own cgroup when writable and not the hierarchy's root)",
    },
    Var {
        name: "PROBACTR_SECRET_KEY",
        default: "",
        help: "32 random bytes in base64 sealing job and channel secrets (manager, executors and monitors; `openssl rand -base64 32`)",
    },
    Var {
        name: "PROBACTR_SECRET_KEY_PREVIOUS",
        default: "",
        help: "the key before PROBACTR_SECRET_KEY, during a rotation: its secrets still open",
    },
    Var {
        name: "PROBACTR_SECRET_KEY_FILE",
        default: "",
        help: "a file holding PROBACTR_SECRET_KEY, instead of the variable (Docker and Kubernetes secrets)",
    },
    Var {
        name: "PROBACTR_SECRET_KEY_PREVIOUS_FILE",
        default: "",
        help: "a file holding PROBACTR_SECRET_KEY_PREVIOUS, instead of the variable",
    },
    Var {
        name: "DATABASE_URL_FILE",
        default: "",
        help: "a file holding DATABASE_URL, instead of the variable",
    },
    Var {
        name: "DATABASE_READ_URL_FILE",
        default: "",
        help: "a file holding DATABASE_READ_URL, instead of the variable",
    },
    Var {
        name: "REDIS_URL_FILE",
        default: "",
        help: "a file holding REDIS_URL, instead of the variable",
    },
    Var {
        name: "PROBACTR_TRUSTED_PROXIES",
        default: "",
        help: "comma-separated CIDR ranges of reverse proxies whose X-Forwarded-For names the client (the manager's login rate limit)",
    },
    Var {
        name: "PROBACTR_SMTP_URL",
        default: "",
        help: "SMTP server monitors send alert mail through: smtps://user:pass@host:port (TLS), smtp://…?tls=starttls, or smtp://…?tls=none for a plain relay (off when empty)",
    },
    Var {
        name: "PROBACTR_SMTP_URL_FILE",
        default: "",
        help: "a file holding PROBACTR_SMTP_URL, instead of the variable",
    },
    Var {
        name: "PROBACTR_SMTP_FROM",
        default: "probactr@localhost",
        help: "sender address of alert mail",
    },
    Var {
        name: "PROBACTR_PUBLIC_URL",
        default: "http://127.0.0.1:8080",
        help: "the manager's address as users reach it, for links in alerts and the URLs of webhook triggers",
    },
    Var {
        name: "PROBACTR_ALERT_RETRY_FOR",
        default: "1h",
        help: "how long monitors retry an alert delivery that fails before marking it failed",
    },
    Var {
        name: "PROBACTR_METRICS_LISTEN",
        default: "",
        help: "address an executor or monitor serves Prometheus metrics on (off when empty)",
    },
    Var {
        name: "PROBACTR_MANAGER_LISTEN",
        default: "127.0.0.1:8080",
        help: "address the manager's web admin and API listen on",
    },
    Var {
        name: "PROBACTR_COOKIE_SECURE",
        default: "false",
        help: "mark the manager's session cookie Secure (set true when it is served over HTTPS)",
    },
    Var {
        name: "PROBACTR_SSE_PER_USER",
        default: "10",
        help: "live output streams one user may have open at once on a manager; more are answered 429",
    },
    Var {
        name: "PROBACTR_SSE_MAX_SECS",
        default: "3600",
        help: "seconds after which the manager ends a live output stream (the client reconnects to go on)",
    },
    Var {
        name: "PROBACTR_ADMIN_USER",
        default: "admin",
        help: "name of the first admin, created when no user exists",
    },
    Var {
        name: "PROBACTR_ADMIN_PASSWORD",
        default: "",
        help: "password of the first admin (at least 12 characters; required when no user exists)",
    },
    Var {
        name: "PROBACTR_ADMIN_PASSWORD_FILE",
        default: "",
        help: "a file holding PROBACTR_ADMIN_PASSWORD, instead of the variable",
    },
    Var {
        name: "PROBACTR_OIDC_ISSUER",
        default: "",
        help: "single sign-on: the OpenID Connect provider's issuer URL (https://…; http:// only on this machine), discovered at /.well-known/openid-configuration (off when empty)",
    },
    Var {
        name: "PROBACTR_OIDC_CLIENT_ID",
        default: "",
        help: "single sign-on: the manager's client id at the provider (required with PROBACTR_OIDC_ISSUER)",
    },
    Var {
        name: "PROBACTR_OIDC_CLIENT_SECRET",
        default: "",
        help: "single sign-on: the manager's client secret at the provider (empty: a public client, PKCE alone)",
    },
    Var {
        name: "PROBACTR_OIDC_CLIENT_SECRET_FILE",
        default: "",
        help: "a file holding PROBACTR_OIDC_CLIENT_SECRET, instead of the variable",
    },
    Var {
        name: "PROBACTR_OIDC_SCOPES",
        default: "profile email groups",
        help: "single sign-on: scopes asked for besides openid, space-separated",
    },
    Var {
        name: "PROBACTR_OIDC_GROUPS_CLAIM",
        default: "groups",
        help: "single sign-on: the claim (ID token, else userinfo) listing the user's groups",
    },
    Var {
        name: "PROBACTR_OIDC_ROLE_MAP",
        default: "",
        help: "single sign-on: roles from groups, GROUP:NAMESPACE=ROLE, GROUP:*=ROLE (every namespace) or GROUP:cluster_admin, comma-separated; applied at every login, the highest role per namespace",
    },
    Var {
        name: "PROBACTR_OIDC_NAME",
        default: "",
        help: "single sign-on: the provider's name on the login button, `Sign in with NAME` (the issuer's host when empty)",
    },
    Var {
        name: "PROBACTR_LOCAL_LOGIN",
        default: "true",
        help: "false turns password logins (admin form and POST /api/v1/auth/token) off for everyone but PROBACTR_BREAK_GLASS_USER; needs single sign-on; API tokens keep working",
    },
    Var {
        name: "PROBACTR_BREAK_GLASS_USER",
        default: "",
        help: "the one cluster admin who may still log in with a password when PROBACTR_LOCAL_LOGIN is false (required then)",
    },
    Var {
        name: "PROBACTR_LOG_FORMAT",
        default: "text",
        help: "log format: text or json",
    },
    Var {
        name: "RUST_LOG",
        default: "info",
        help: "log filter (tracing EnvFilter syntax)",
    },
    Var {
        name: "OTEL_EXPORTER_OTLP_ENDPOINT",
        default: "",
        help: "traces: the OTLP/HTTP collector's base URL (/v1/traces is added); traces are off when neither endpoint is set",
    },
    Var {
        name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        default: "",
        help: "traces: the full URL spans are posted to (instead of the base URL)",
    },
    Var {
        name: "OTEL_EXPORTER_OTLP_PROTOCOL",
        default: "http/protobuf",
        help: "traces: the OTLP protocol; only http/protobuf is spoken",
    },
    Var {
        name: "OTEL_EXPORTER_OTLP_HEADERS",
        default: "",
        help: "traces: headers of every export, key=value,key2=value2 (a collector's token)",
    },
    Var {
        name: "OTEL_SERVICE_NAME",
        default: "",
        help: "traces: the service name (the process's name, e.g. probactr-executor, when empty)",
    },
    Var {
        name: "OTEL_TRACES_SAMPLER",
        default: "parentbased_always_on",
        help: "traces: the sampler; a run's trace is kept or dropped whole (always_off, traceidratio and their parentbased_ forms are honoured for runs)",
    },
    Var {
        name: "OTEL_TRACES_SAMPLER_ARG",
        default: "",
        help: "traces: the ratio of traceidratio samplers (0 to 1)",
    },
];

/// The default of a variable (empty when it has none).
pub(super) fn default_of(name: &str) -> &'static str {
    VARS.iter()
        .find(|var| var.name == name)
        .map(|var| var.default)
        .unwrap_or("")
}
