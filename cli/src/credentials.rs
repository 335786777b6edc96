//! Where `probactr login` keeps the manager's address and the token: a file only its
//! owner can read (mode 0600) in the user's configuration directory. `PROBACTR_URL` and
//! `PROBACTR_TOKEN` override it.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use serde_json::{json, Value};

/// The manager and the token to use.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// The manager's address.
    pub url: Option<String>,
    /// The bearer token.
    pub token: Option<String>,
}

/// `$XDG_CONFIG_HOME/probactr/credentials.json`, else `~/.config/probactr/credentials.json`.
pub fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("probactr").join("credentials.json"))
}

/// The saved credentials, overridden by `PROBACTR_URL` and `PROBACTR_TOKEN`.
pub fn load() -> Credentials {
    let saved: Value = path()
        .and_then(|p| fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let text = |field: &str| saved.get(field).and_then(Value::as_str).map(str::to_owned);
    Credentials {
        url: env("PROBACTR_URL").or_else(|| text("url")),
        token: env("PROBACTR_TOKEN").or_else(|| text("token")),
    }
}

/// Saves the manager's address and a token, readable by the owner alone.
pub fn save(url: &str, token: &str) -> anyhow::Result<PathBuf> {
    let file = path().ok_or_else(|| anyhow::anyhow!("no HOME or XDG_CONFIG_HOME to keep the token in"))?;
    if let Some(dir) = file.parent() {
        fs::create_dir_all(dir)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&file)?;
    // An existing file keeps its mode through open(); make sure of it.
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600))?;
    out.write_all(json!({"url": url, "token": token}).to_string().as_bytes())?;
    Ok(file)
}

/// Forgets the saved credentials.
pub fn forget() -> anyhow::Result<()> {
    if let Some(file) = path().filter(|file| file.exists()) {
        fs::remove_file(file)?;
    }
    Ok(())
}
