//! Start-up.

use super::*;

fn config_with(password: Option<&str>) -> Config {
    let mut map = HashMap::from([("PROBACTR_ADMIN_USER".to_owned(), "root".to_owned())]);
    if let Some(password) = password {
        map.insert("PROBACTR_ADMIN_PASSWORD".to_owned(), password.to_owned());
    }
    Config::from_map(&map).unwrap()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn first_admin_comes_from_configuration(pool: PgPool) {
    use probactr_manager::startup::{bootstrap_admin, Bootstrap, BootstrapError};
    let app = TestApp::new(pool);
    let missing = bootstrap_admin(&app.state, &config_with(None)).await.unwrap();
    assert!(matches!(missing, Err(BootstrapError::MissingPassword { .. })));
    let short = bootstrap_admin(&app.state, &config_with(Some("short")))
        .await
        .unwrap();
    assert_eq!(short, Err(BootstrapError::WeakPassword));
    assert!(short.unwrap_err().to_string().contains("PROBACTR_ADMIN_PASSWORD"));
    let created = bootstrap_admin(&app.state, &config_with(Some("a long enough password")))
        .await
        .unwrap();
    assert_eq!(created, Ok(Bootstrap::Created));
    let user = store::users::by_name(app.pool(), "root").await.unwrap().unwrap();
    assert_eq!(user.role(), Role::Admin);
    assert!(user.password_hash.starts_with("$argon2id$"));
    let again = bootstrap_admin(&app.state, &config_with(None)).await.unwrap();
    assert_eq!(
        again,
        Ok(Bootstrap::UsersExist),
        "a second start needs no password"
    );
}

/// Values sealed by a release before binding (no associated data, `bound` false) and a
/// channel URL kept in the clear are re-sealed at start, bound to their owners: they
/// open as before, only as what they seal, the URL is masked in the configuration, and a
/// second start finds nothing to do.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn values_sealed_before_binding_are_bound_at_start(pool: PgPool) {
    use aes_gcm::aead::{Aead, KeyInit};
    use aes_gcm::{Aes256Gcm, Nonce};
    use probactr_common::secrets::{Keyring, Owner, SecretKey};
    use probactr_manager::sealing::{bind_unbound, Bound};

    let key = SecretKey::parse(probactr_testkit::TEST_SECRET_KEY).unwrap();
    let keys = Keyring::new(key.clone(), None);
    // TEST_SECRET_KEY is 32 bytes of 0x01, in base64.
    let cipher = Aes256Gcm::new_from_slice(&[1u8; 32]).unwrap();
    let legacy = |value: &str, nonce: u8| {
        let nonce = [nonce; 12];
        let sealed = cipher.encrypt(&Nonce::from(nonce), value.as_bytes()).unwrap();
        (nonce.to_vec(), sealed)
    };
    let (nonce, sealed) = legacy("old-password", 1);
    sqlx::query(
        "INSERT INTO secrets (name, key_id, nonce, ciphertext, updated_by) VALUES ('db', $1, $2, $3, 'then')",
    )
    .bind(key.id())
    .bind(nonce)
    .bind(sealed)
    .execute(&pool)
    .await
    .unwrap();
    let url = "https://hooks.slack.com/services/T1/B2/legacy-token-77";
    let (nonce, sealed) = legacy("sign-me", 2);
    let channel: i64 = sqlx::query_scalar(
        "INSERT INTO alert_channels (name, kind, config, secret_key_id, secret_nonce, secret_sealed)
         VALUES ('hook', 'webhook', jsonb_build_object('url', $1::text), $2, $3, $4) RETURNING id",
    )
    .bind(url)
    .bind(key.id())
    .bind(nonce)
    .bind(sealed)
    .fetch_one(&pool)
    .await
    .unwrap();

    let bound = bind_unbound(&pool, &keys).await.unwrap();
    assert_eq!(
        bound,
        Bound {
            secrets: 1,
            channels: 1,
            failed: 0
        }
    );
    let secret = store::secrets::sealed(&pool, store::namespaces::DEFAULT, &["db".to_owned()])
        .await
        .unwrap();
    let (_, secret) = &secret[0];
    assert!(secret.bound);
    assert_eq!(
        keys.open(&Owner::secret("default", "db"), secret).as_deref(),
        Ok("old-password")
    );
    assert!(keys.open(&Owner::secret("default", "other"), secret).is_err());
    let parts = store::alerts::channels::sealed_under_other_keys(&pool, "none")
        .await
        .unwrap();
    let parts = &parts[0];
    assert!(parts.config["url"]
        .as_str()
        .unwrap()
        .starts_with("https://hooks.slack.com/***"));
    let opened_url = keys.open(&Owner::ChannelUrl(channel), parts.url.as_ref().unwrap());
    assert_eq!(opened_url.as_deref(), Ok(url));
    let opened_secret = keys.open(&Owner::ChannelSecret(channel), parts.secret.as_ref().unwrap());
    assert_eq!(opened_secret.as_deref(), Ok("sign-me"));
    assert!(parts.secret.as_ref().unwrap().bound);
    let row: String = sqlx::query_scalar("SELECT row_to_json(c)::text FROM alert_channels AS c")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!row.contains("legacy-token-77"), "{row}");

    assert_eq!(
        bind_unbound(&pool, &keys).await.unwrap(),
        Bound::default(),
        "a second start has nothing to do"
    );
}
