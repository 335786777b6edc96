//! Start-up.

use super::*;

fn config_with(password: Option<&str>) -> Config {
    let mut map = HashMap::from([("PROBACTR_ADMIN_USER".to_owned(), "root".to_owned())]);
    if let Some(password) = password {
        map.insert("PROBACTR_ADMIN_PASSWORD".to_owned(), password.to_owned());
    }
    Config::from_map(&map).unwrap()
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
