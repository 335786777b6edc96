//! Commands for teams sharing the cluster: namespaces (with their quotas), a user's roles
//! per namespace, and API tokens scoped to some namespaces and a role (for CI).

use anyhow::{bail, Context};
use clap::Subcommand;
use serde_json::{json, Map, Value};

use crate::client::Client;
use crate::commands::{encode, items, Exit};
use crate::output::{self, Format};

/// `probactr namespaces …` (creating, changing and deleting need a cluster admin).
#[derive(Debug, Subcommand)]
pub enum NamespacesCommand {
    /// List the namespaces you may see.
    List,
    /// Show a namespace.
    Get {
        /// Its name.
        name: String,
    },
    /// Create a namespace.
    Create {
        /// Its name (lower-case letters, digits and dashes).
        name: String,
        #[command(flatten)]
        settings: NamespaceSettings,
    },
    /// Change a namespace's description or quotas (`--max-running none` lifts a quota).
    Update {
        /// Its name.
        name: String,
        #[command(flatten)]
        settings: NamespaceSettings,
    },
    /// Delete an empty namespace.
    Delete {
        /// Its name.
        name: String,
    },
}

/// What a namespace says about itself.
#[derive(Debug, clap::Args)]
pub struct NamespaceSettings {
    /// What the namespace is for.
    #[arg(long)]
    description: Option<String>,
    /// At most this many of its runs claimed or running at once (`none`: no quota).
    #[arg(long, value_name = "N|none")]
    max_running: Option<String>,
    /// At most this many jobs (`none`: no quota).
    #[arg(long, value_name = "N|none")]
    max_jobs: Option<String>,
}

impl NamespaceSettings {
    /// The body of a create or update: only what was given.
    fn body(&self) -> anyhow::Result<Map<String, Value>> {
        let mut body = Map::new();
        if let Some(description) = &self.description {
            body.insert("description".into(), json!(description));
        }
        for (field, given) in [("max_running", &self.max_running), ("max_jobs", &self.max_jobs)] {
            if let Some(given) = given {
                body.insert(field.into(), quota(field, given)?);
            }
        }
        Ok(body)
    }
}

/// A quota option's value: a number, or `none` for no quota.
fn quota(field: &str, given: &str) -> anyhow::Result<Value> {
    if given.eq_ignore_ascii_case("none") {
        return Ok(Value::Null);
    }
    let number: i64 = given.parse().with_context(|| {
        format!(
            "--{}: expected a number or none, got {given:?}",
            field.replace('_', "-")
        )
    })?;
    Ok(json!(number))
}

const NAMESPACE_COLUMNS: &[(&str, &str)] = &[
    ("name", "NAME"),
    ("max_running", "MAX RUNNING"),
    ("max_jobs", "MAX JOBS"),
    ("description", "DESCRIPTION"),
];

/// Runs a `namespaces` command.
pub async fn namespaces(client: &Client, command: NamespacesCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        NamespacesCommand::List => {
            let page = client.get("/namespaces").await?;
            output::list(format, &items(&page), NAMESPACE_COLUMNS);
        }
        NamespacesCommand::Get { name } => {
            output::one(
                format,
                &client.get(&format!("/namespaces/{}", encode(&name))).await?,
            );
        }
        NamespacesCommand::Create { name, settings } => {
            let mut body = settings.body()?;
            body.insert("name".into(), json!(name));
            let created = client.post("/namespaces", &Value::Object(body)).await?;
            eprintln!("Namespace {name} created");
            output::one(format, &created);
        }
        NamespacesCommand::Update { name, settings } => {
            let body = settings.body()?;
            if body.is_empty() {
                bail!("nothing to change: give --description, --max-running or --max-jobs");
            }
            let path = format!("/namespaces/{}", encode(&name));
            let updated = client
                .call(reqwest::Method::PATCH, &path, Some(&Value::Object(body)))
                .await?;
            eprintln!("Namespace {name} updated");
            output::one(format, &updated);
        }
        NamespacesCommand::Delete { name } => {
            client.delete(&format!("/namespaces/{}", encode(&name))).await?;
            eprintln!("Namespace {name} deleted");
        }
    }
    Ok(Exit::Success)
}

/// `probactr users …` (cluster admins).
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// List users.
    List,
    /// Show a user's roles: cluster admin or not, and a role per namespace.
    Roles {
        /// The user's name.
        username: String,
    },
    /// Replace a user's roles.
    Grant {
        /// The user's name.
        username: String,
        /// `NAMESPACE=ROLE` (viewer, operator or admin; repeatable). Namespaces not named
        /// lose the user's role.
        #[arg(long = "role", value_name = "NAMESPACE=ROLE")]
        roles: Vec<String>,
        /// Make the user a cluster admin (or not, with `--cluster-admin false`).
        #[arg(long, value_name = "true|false", num_args = 0..=1, default_missing_value = "true")]
        cluster_admin: Option<bool>,
    },
}

const USER_COLUMNS: &[(&str, &str)] = &[
    ("id", "ID"),
    ("username", "USER"),
    ("cluster_admin", "CLUSTER ADMIN"),
    ("disabled", "DISABLED"),
];

/// Runs a `users` command.
pub async fn users(client: &Client, command: UsersCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        UsersCommand::List => {
            let page = client.get("/users").await?;
            output::list(format, &listed(&page), USER_COLUMNS);
        }
        UsersCommand::Roles { username } => {
            let id = user_id(client, &username).await?;
            output::one(format, &client.get(&format!("/users/{id}/roles")).await?);
        }
        UsersCommand::Grant {
            username,
            roles,
            cluster_admin,
        } => {
            let id = user_id(client, &username).await?;
            let path = format!("/users/{id}/roles");
            let cluster_admin = match cluster_admin {
                Some(flag) => flag,
                None => client.get(&path).await?["cluster_admin"]
                    .as_bool()
                    .unwrap_or(false),
            };
            let body = json!({"cluster_admin": cluster_admin, "namespaces": role_map(&roles)?});
            let granted = client.call(reqwest::Method::PUT, &path, Some(&body)).await?;
            eprintln!("Roles of {username} replaced");
            output::one(format, &granted);
        }
    }
    Ok(Exit::Success)
}

/// `--role NAMESPACE=ROLE` options as the API's map of namespace to role.
fn role_map(given: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut roles = Map::new();
    for pair in given {
        let Some((namespace, role)) = pair.split_once('=') else {
            bail!("--role {pair:?}: expected NAMESPACE=ROLE");
        };
        if roles
            .insert(namespace.trim().to_owned(), json!(role.trim()))
            .is_some()
        {
            bail!("--role {pair:?}: namespace {namespace:?} is given twice");
        }
    }
    Ok(roles)
}

/// A list answer's objects, whether paged (`items`) or a bare array.
fn listed(answer: &Value) -> Vec<Value> {
    answer.as_array().cloned().unwrap_or_else(|| items(answer))
}

async fn user_id(client: &Client, username: &str) -> anyhow::Result<i64> {
    let page = client.get("/users").await?;
    listed(&page)
        .iter()
        .find(|user| user["username"] == username)
        .and_then(|user| user["id"].as_i64())
        .with_context(|| format!("no user is named {username:?} (`probactr users list` shows them)"))
}

/// `probactr tokens …`: the caller's API tokens.
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// List your tokens (never their secrets).
    List,
    /// Make a token, optionally confined to some namespaces and a role (a CI token that
    /// runs one namespace's jobs: `--namespaces payments --role operator`). It never gets
    /// more than you have. The secret is printed once.
    Create {
        /// A label.
        #[arg(long)]
        name: Option<String>,
        /// Only these namespaces (comma-separated; none: every namespace you may see).
        #[arg(long = "namespaces", value_name = "NAME,…", value_delimiter = ',')]
        namespaces: Vec<String>,
        /// At most this role (viewer, operator or admin).
        #[arg(long)]
        role: Option<String>,
        /// Days until it stops working by itself.
        #[arg(long)]
        expires_in_days: Option<i64>,
    },
    /// Revoke one of your tokens.
    Revoke {
        /// Its id.
        id: i64,
    },
}

const TOKEN_COLUMNS: &[(&str, &str)] = &[
    ("id", "ID"),
    ("name", "NAME"),
    ("namespaces", "NAMESPACES"),
    ("role", "ROLE"),
    ("expires_at", "EXPIRES"),
    ("last_used_at", "LAST USED"),
];

/// Runs a `tokens` command.
pub async fn tokens(client: &Client, command: TokensCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        TokensCommand::List => {
            let page = client.get("/tokens").await?;
            output::list(format, &listed(&page), TOKEN_COLUMNS);
        }
        TokensCommand::Create {
            name,
            namespaces,
            role,
            expires_in_days,
        } => {
            let mut body = json!({"name": name, "expires_in_days": expires_in_days});
            if !namespaces.is_empty() {
                body["namespaces"] = json!(namespaces);
            }
            if let Some(role) = role {
                body["role"] = json!(role);
            }
            let created = client.post("/tokens", &body).await?;
            match format {
                Format::Table => println!("{}", created["token"].as_str().unwrap_or_default()),
                _ => output::one(format, &created),
            }
            eprintln!("Token #{} made; its secret is shown this once", created["id"]);
        }
        TokensCommand::Revoke { id } => {
            client.delete(&format!("/tokens/{id}")).await?;
            eprintln!("Token #{id} revoked");
        }
    }
    Ok(Exit::Success)
}
