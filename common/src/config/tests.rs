//! The settings' parsing, defaults, consistency and redaction.

use super::units::parse_bytes;
use super::*;

fn config_with(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_map(&map)
}

#[test]
fn defaults_make_a_local_config() {
    let config = config_with(&[]).expect("defaults are valid");
    assert_eq!(config.heartbeat_interval, Duration::from_secs(5));
    assert_eq!(config.heartbeat_timeout, Duration::from_secs(15));
    assert_eq!(config.reap_interval, Duration::from_secs(5));
    assert_eq!(config.lock_lease, Duration::from_secs(30));
    assert_eq!(config.redis_prefix, "probactr:");
    assert_eq!(config.admin_password, None);
    assert_eq!(config.executor_namespaces, None, "every namespace");
}

#[test]
fn executor_namespaces_are_a_list_of_names() {
    let config = config_with(&[("PROBACTR_EXECUTOR_NAMESPACES", " payments, team-2 ,")]).expect("valid");
    assert_eq!(
        config.executor_namespaces,
        Some(vec!["payments".to_owned(), "team-2".to_owned()])
    );
}

#[test]
fn durations_parse_in_every_unit() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
    for bad in ["", "5", "s", "5 s", "-5s", "5x", "1.5s", "99999999999999999999d"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} should not parse");
    }
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(format_duration(Duration::from_secs(120)), "2m");
}

#[test]
fn sizes_parse_in_bytes_kib_and_mib() {
    assert_eq!(config_with(&[]).expect("defaults").output_limit, 1024 * 1024);
    assert_eq!(parse_bytes("65536"), Some(65536));
    assert_eq!(parse_bytes("512KiB"), Some(512 * 1024));
    assert_eq!(parse_bytes("2M"), Some(2 * 1024 * 1024));
    for bad in ["", "KiB", "1.5MiB", "1GiB", "-1"] {
        assert_eq!(parse_bytes(bad), None, "{bad:?} should not parse");
    }
    let err = config_with(&[("PROBACTR_OUTPUT_LIMIT", "10")]).expect_err("below the minimum");
    assert!(err.to_string().contains("PROBACTR_OUTPUT_LIMIT"), "{err}");
}

#[test]
fn the_output_archive_is_an_s3_bucket_and_prefix() {
    assert_eq!(config_with(&[]).expect("defaults").output_archive, None);
    let config = config_with(&[("PROBACTR_OUTPUT_ARCHIVE", "s3://runs-out/probactr/prod/")]).expect("valid");
    let location = config.output_archive.expect("set");
    assert_eq!(
        (location.bucket.as_str(), location.prefix.as_str()),
        ("runs-out", "probactr/prod")
    );
    for bad in ["runs-out", "s3://", "gs://bucket/x", "s3://Bad_Bucket/x"] {
        let err = config_with(&[("PROBACTR_OUTPUT_ARCHIVE", bad)]).expect_err(bad);
        assert!(err.to_string().contains("PROBACTR_OUTPUT_ARCHIVE"), "{err}");
    }
}

#[test]
fn a_bad_value_names_its_variable() {
    let cases = [
        ("PROBACTR_HEARTBEAT_INTERVAL", "fast"),
        ("PROBACTR_LOCK_LEASE", "0s"),
        ("PROBACTR_EXECUTOR_CAPACITY", "-1"),
        ("PROBACTR_EXECUTOR_CAPACITY", "0"),
        ("DATABASE_URL", "mysql://x"),
        ("REDIS_URL", "localhost:6379"),
        ("PROBACTR_MANAGER_LISTEN", "everywhere"),
        ("PROBACTR_LOG_FORMAT", "xml"),
        ("PROBACTR_COOKIE_SECURE", "maybe"),
        ("PROBACTR_LOCK_RETRY", "sometimes"),
        ("PROBACTR_EXECUTOR_NAMESPACES", "payments,Reports"),
        ("PROBACTR_EXECUTOR_NAMESPACES", "-a"),
    ];
    for (var, value) in cases {
        let err = config_with(&[(var, value)]).expect_err(var);
        assert!(err.to_string().contains(var), "{err} should name {var}");
        assert!(
            err.to_string().contains("expected"),
            "{err} should say what is expected"
        );
    }
}

#[test]
fn heartbeat_timeout_must_exceed_interval() {
    let err = config_with(&[
        ("PROBACTR_HEARTBEAT_INTERVAL", "5s"),
        ("PROBACTR_HEARTBEAT_TIMEOUT", "5s"),
    ])
    .expect_err("equal timeout is inconsistent");
    assert!(matches!(
        err,
        ConfigError::Inconsistent {
            var: "PROBACTR_HEARTBEAT_TIMEOUT",
            ..
        }
    ));
}

#[test]
fn misspelt_variables_are_named_with_the_likely_intent() {
    // Spelt in two parts, so that the file names no variable nothing reads.
    let misspelt = concat!("PROBACTR", "_EXECUTOR_CAPACTY");
    let unheard_of = concat!("PROBACTR", "_WHATEVER_THIS_IS");
    let unknown = unknown_variables([
        misspelt,
        "PROBACTR_EXECUTOR_CAPACITY",
        "PROBACTR_STATE",
        unheard_of,
        "HOME",
    ]);
    let text: Vec<String> = unknown.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            format!("unknown {misspelt}, did you mean PROBACTR_EXECUTOR_CAPACITY?"),
            format!("unknown {unheard_of} (it is ignored)"),
        ]
    );
}

#[test]
fn errors_hide_passwords() {
    let err = config_with(&[("DATABASE_URL", "mysql://u:secret@db/x")]).expect_err("wrong scheme");
    assert!(!err.to_string().contains("secret"), "{err}");
    assert!(err.to_string().contains("DATABASE_URL"), "{err}");
}

#[test]
fn summary_hides_passwords() {
    let config = config_with(&[("DATABASE_URL", "postgres://u:secret@db/x")]).expect("valid");
    assert!(!config.summary().contains("secret"));
    assert!(config.summary().contains("u:***@db/x"));
}

#[test]
fn smtp_urls() {
    let plain = SmtpSettings::parse("smtp://127.0.0.1:2525?tls=none").expect("valid");
    assert_eq!(
        (plain.host.as_str(), plain.port, plain.tls),
        ("127.0.0.1", 2525, SmtpTls::None)
    );
    assert_eq!(plain.user, None);
    let login = SmtpSettings::parse("smtp://alerts%40example.com:p%40ss@mail.example.com?tls=starttls")
        .expect("valid");
    assert_eq!(login.user.as_deref(), Some("alerts@example.com"));
    assert_eq!(login.password.as_deref(), Some("p@ss"));
    assert_eq!((login.port, login.tls), (25, SmtpTls::StartTls));
    let wrapped = SmtpSettings::parse("smtps://u:p@mail.example.com").expect("valid");
    assert_eq!((wrapped.port, wrapped.tls), (465, SmtpTls::Wrapper));
    assert!(
        !format!("{wrapped:?}").contains("\"p\""),
        "Debug hides the password"
    );
    for bad in [
        "http://mail",
        "smtp://",
        "smtp://mail?tls=maybe",
        "smtps://mail?tls=starttls",
        "smtp://mail?tls=none&tls=starttls",
    ] {
        assert!(SmtpSettings::parse(bad).is_err(), "{bad} accepted");
    }
}

#[test]
fn a_bad_smtp_url_is_named_without_its_password() {
    let err = config_with(&[("PROBACTR_SMTP_URL", "smtp://u:hunter2@mail?tls=maybe")]).expect_err("invalid");
    let text = err.to_string();
    assert!(text.contains("PROBACTR_SMTP_URL"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let err = config_with(&[("PROBACTR_SMTP_FROM", "nobody")]).expect_err("invalid");
    assert!(err.to_string().contains("PROBACTR_SMTP_FROM"));
}

#[test]
fn smtp_without_tls_must_say_so() {
    for plain in ["smtp://u:hunter2@mail.example.com:587", "smtp://mail.example.com"] {
        let err = config_with(&[("PROBACTR_SMTP_URL", plain)]).expect_err("plain text by default");
        let text = err.to_string();
        assert!(
            text.contains("PROBACTR_SMTP_URL") && text.contains("tls=none"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }
    let config = config_with(&[("PROBACTR_SMTP_URL", "smtp://relay.internal?tls=none")]).expect("chosen");
    assert_eq!(config.smtp.map(|smtp| smtp.tls), Some(SmtpTls::None));
    let config =
        config_with(&[("PROBACTR_SMTP_URL", "smtp://mail.example.com:587?tls=starttls")]).expect("STARTTLS");
    assert_eq!(config.smtp.map(|smtp| smtp.tls), Some(SmtpTls::StartTls));
}

#[test]
fn every_variable_has_a_parsing_default() {
    let names: Vec<_> = VARS.iter().map(|v| v.name).collect();
    let unique: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(names.len(), unique.len(), "a variable is declared twice");
}

fn error_names(pairs: &[(&str, &str)], var: &str) {
    let err = config_with(pairs).expect_err(var).to_string();
    assert!(err.contains(var), "{pairs:?}: {err}");
}

#[test]
fn single_sign_on_is_off_by_default_and_read_when_an_issuer_is_set() {
    let config = config_with(&[]).expect("defaults");
    assert_eq!(config.oidc, None);
    assert_eq!(config.local_login, LocalLogin::Open);
    let config = config_with(&[
        ("PROBACTR_OIDC_ISSUER", "https://id.example.com/realms/ops"),
        ("PROBACTR_OIDC_CLIENT_ID", "probactr"),
        ("PROBACTR_OIDC_CLIENT_SECRET", "s3cret"),
        ("PROBACTR_OIDC_ROLE_MAP", "ops:cluster_admin"),
        ("PROBACTR_LOCAL_LOGIN", "false"),
        ("PROBACTR_BREAK_GLASS_USER", "root"),
    ])
    .expect("valid");
    let oidc = config.oidc.expect("on");
    assert_eq!(oidc.name, "id.example.com");
    assert_eq!(oidc.scopes, vec!["profile", "email", "groups"]);
    assert_eq!(oidc.groups_claim, "groups");
    assert!(
        !format!("{oidc:?}").contains("s3cret"),
        "the secret is never printed"
    );
    assert_eq!(config.local_login, LocalLogin::BreakGlassOnly("root".into()));
    assert!(config.local_login.allows("root") && !config.local_login.allows("alice"));
}

#[test]
fn bad_single_sign_on_settings_are_named() {
    let issuer = ("PROBACTR_OIDC_ISSUER", "https://id.example.com");
    let client = ("PROBACTR_OIDC_CLIENT_ID", "probactr");
    error_names(
        &[("PROBACTR_OIDC_ISSUER", "http://id.example.com"), client],
        "PROBACTR_OIDC_ISSUER",
    );
    error_names(
        &[("PROBACTR_OIDC_ISSUER", "id.example.com"), client],
        "PROBACTR_OIDC_ISSUER",
    );
    error_names(&[issuer], "PROBACTR_OIDC_CLIENT_ID");
    error_names(
        &[issuer, client, ("PROBACTR_OIDC_ROLE_MAP", "ops")],
        "PROBACTR_OIDC_ROLE_MAP",
    );
    error_names(
        &[issuer, client, ("PROBACTR_OIDC_GROUPS_CLAIM", " ")],
        "PROBACTR_OIDC_GROUPS_CLAIM",
    );
    error_names(&[client], "PROBACTR_OIDC_CLIENT_ID");
    error_names(&[("PROBACTR_LOCAL_LOGIN", "false")], "PROBACTR_LOCAL_LOGIN");
    error_names(
        &[issuer, client, ("PROBACTR_LOCAL_LOGIN", "false")],
        "PROBACTR_BREAK_GLASS_USER",
    );
    error_names(
        &[issuer, client, ("PROBACTR_LOCAL_LOGIN", "maybe")],
        "PROBACTR_LOCAL_LOGIN",
    );
    assert!(config_with(&[("PROBACTR_OIDC_ISSUER", "http://127.0.0.1:5556/dex"), client]).is_ok());
}

#[test]
fn the_cgroup_setting_is_auto_off_or_an_absolute_path() {
    assert_eq!(config_with(&[]).expect("defaults").cgroup, CgroupSetting::Auto);
    let off = config_with(&[("PROBACTR_CGROUP", "off")]).expect("off");
    assert_eq!(off.cgroup, CgroupSetting::Off);
    let path = config_with(&[("PROBACTR_CGROUP", "/sys/fs/cgroup/probactr")]).expect("a path");
    assert_eq!(path.cgroup, CgroupSetting::Path("/sys/fs/cgroup/probactr".into()));
    let err = config_with(&[("PROBACTR_CGROUP", "probactr")]).expect_err("a relative path");
    assert!(err.to_string().contains("PROBACTR_CGROUP"), "{err}");
}

#[test]
fn the_replicas_url_may_come_from_a_file() {
    let dir = std::env::temp_dir().join(format!("probactr-read-url-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("database-read-url");
    std::fs::write(&file, "postgres://reader:pw@replica:5432/probactr\n").expect("write");
    let path = file.display().to_string();
    let config = config_with(&[("DATABASE_READ_URL_FILE", &path)]).expect("a file");
    assert_eq!(
        config.database_read_url.as_deref(),
        Some("postgres://reader:pw@replica:5432/probactr")
    );
    let both = config_with(&[
        ("DATABASE_READ_URL_FILE", &path),
        ("DATABASE_READ_URL", "postgres://replica/probactr"),
    ]);
    assert!(both
        .expect_err("both")
        .to_string()
        .contains("DATABASE_READ_URL_FILE"));
    let _ = std::fs::remove_dir_all(&dir);
}
