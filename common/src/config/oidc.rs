//! Single sign-on settings: the OpenID Connect provider the manager sends people to
//! (`PROBACTR_OIDC_ISSUER` and the settings beside it), the map from the provider's groups to roles, and whether password
//! logins stay open (`PROBACTR_LOCAL_LOGIN`, `PROBACTR_BREAK_GLASS_USER`).
//!
//! The role map is `GROUP:NAMESPACE=ROLE`, `GROUP:*=ROLE` (that role in every namespace)
//! or `GROUP:cluster_admin`, comma-separated; a group name may itself hold `:` (the last
//! one separates it). Applying the map to a user's groups is [`RoleMap::grant`].

use std::collections::BTreeMap;

use super::env::Env;
use super::ConfigError;
use crate::model::Role;

/// What one entry of the role map gives the members of its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// `ROLE` in the namespace `NAMESPACE`.
    Namespace {
        /// The namespace.
        namespace: String,
        /// The role there.
        role: Role,
    },
    /// `ROLE` in every namespace (`GROUP:*=ROLE`).
    Everywhere(Role),
    /// Cluster admin (`GROUP:cluster_admin`).
    ClusterAdmin,
}

/// `PROBACTR_OIDC_ROLE_MAP`: per group, what its members get.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleMap {
    /// `(group, grant)`, in the order written.
    pub entries: Vec<(String, Grant)>,
}

/// What a user gets from their groups: cluster admin or not, and a role per namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Whether the user is a cluster admin.
    pub cluster_admin: bool,
    /// The user's role per namespace (the highest their groups give).
    pub namespaces: BTreeMap<String, Role>,
}

/// A role's rank: viewer < operator < admin (their order of declaration).
fn rank(role: Role) -> usize {
    Role::ALL.iter().position(|r| *r == role).unwrap_or(0)
}

/// Keeps the higher of a namespace's current role and `role`.
fn raise(namespaces: &mut BTreeMap<String, Role>, namespace: &str, role: Role) {
    let entry = namespaces.entry(namespace.to_owned()).or_insert(role);
    if rank(role) > rank(*entry) {
        *entry = role;
    }
}

impl RoleMap {
    /// Parses `GROUP:NAMESPACE=ROLE,GROUP:*=ROLE,GROUP:cluster_admin`; the error says
    /// which entry is wrong and why.
    pub fn parse(text: &str) -> Result<RoleMap, String> {
        let mut entries = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((group, target)) = entry.rsplit_once(':') else {
                return Err(format!(
                    "{entry:?} has no `:` (GROUP:NAMESPACE=ROLE, GROUP:*=ROLE or GROUP:cluster_admin)"
                ));
            };
            let group = group.trim();
            if group.is_empty() {
                return Err(format!("{entry:?} names no group"));
            }
            let target = target.trim();
            let grant = if target == "cluster_admin" {
                Grant::ClusterAdmin
            } else {
                let Some((namespace, role)) = target.split_once('=') else {
                    return Err(format!(
                        "{entry:?}: after the group comes NAMESPACE=ROLE, *=ROLE or cluster_admin"
                    ));
                };
                let role: Role = role
                    .trim()
                    .parse()
                    .map_err(|_| format!("{entry:?}: the role must be viewer, operator or admin"))?;
                match namespace.trim() {
                    "" => return Err(format!("{entry:?} names no namespace")),
                    "*" => Grant::Everywhere(role),
                    namespace => Grant::Namespace {
                        namespace: namespace.to_owned(),
                        role,
                    },
                }
            };
            entries.push((group.to_owned(), grant));
        }
        Ok(RoleMap { entries })
    }

    /// What a member of `groups` gets, given the namespaces that exist (`*` means each of
    /// them; a namespace that does not exist is left out). Several groups give the
    /// highest role per namespace.
    pub fn grant(&self, groups: &[String], existing: &[String]) -> Grants {
        let mut grants = Grants::default();
        for (group, grant) in &self.entries {
            if !groups.iter().any(|g| g == group) {
                continue;
            }
            match grant {
                Grant::ClusterAdmin => grants.cluster_admin = true,
                Grant::Everywhere(role) => {
                    for namespace in existing {
                        raise(&mut grants.namespaces, namespace, *role);
                    }
                }
                Grant::Namespace { namespace, role } => {
                    if existing.iter().any(|n| n == namespace) {
                        raise(&mut grants.namespaces, namespace, *role);
                    }
                }
            }
        }
        grants
    }

    /// The namespaces the map names that are not in `existing` (logged at login: a typo
    /// in the map, or a namespace not made yet).
    pub fn unknown_namespaces<'a>(&'a self, existing: &[String]) -> Vec<&'a str> {
        self.entries
            .iter()
            .filter_map(|(_, grant)| match grant {
                Grant::Namespace { namespace, .. } if !existing.contains(namespace) => {
                    Some(namespace.as_str())
                }
                _ => None,
            })
            .collect()
    }
}

/// The OpenID Connect provider (`PROBACTR_OIDC_ISSUER` set).
#[derive(Clone, PartialEq, Eq)]
pub struct OidcSettings {
    /// `PROBACTR_OIDC_ISSUER`, as written (discovery appends
    /// `/.well-known/openid-configuration`).
    pub issuer: String,
    /// `PROBACTR_OIDC_CLIENT_ID`.
    pub client_id: String,
    /// `PROBACTR_OIDC_CLIENT_SECRET` (None: a public client, PKCE alone).
    pub client_secret: Option<String>,
    /// `PROBACTR_OIDC_SCOPES`, besides `openid`.
    pub scopes: Vec<String>,
    /// `PROBACTR_OIDC_GROUPS_CLAIM`.
    pub groups_claim: String,
    /// `PROBACTR_OIDC_ROLE_MAP`.
    pub role_map: RoleMap,
    /// `PROBACTR_OIDC_NAME`, else the issuer's host: the login button says "Sign in with NAME".
    pub name: String,
}

impl std::fmt::Debug for OidcSettings {
    // The client secret is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("scopes", &self.scopes)
            .field("groups_claim", &self.groups_claim)
            .field("role_map", &self.role_map)
            .field("name", &self.name)
            .finish()
    }
}

/// Who may still log in with a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalLogin {
    /// Everyone (`PROBACTR_LOCAL_LOGIN=true`, the default).
    Open,
    /// Only this cluster admin (`PROBACTR_BREAK_GLASS_USER`).
    BreakGlassOnly(String),
}

impl LocalLogin {
    /// Whether `username` may log in with a password.
    pub fn allows(&self, username: &str) -> bool {
        match self {
            LocalLogin::Open => true,
            LocalLogin::BreakGlassOnly(user) => user == username,
        }
    }
}

/// The host of an `http(s)://` URL (without port or path), if it has one.
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if host.starts_with('[') {
        host.split_inclusive(']').next()?
    } else {
        host.split(':').next()?
    };
    Some(host).filter(|h| !h.is_empty())
}

/// Plain HTTP is only for a provider on this machine (tests, development).
fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "[::1]") || host.starts_with("127.")
}

/// Reads the single sign-on settings; None when `PROBACTR_OIDC_ISSUER` is empty.
pub(super) fn read(env: &Env<'_>) -> Result<Option<OidcSettings>, ConfigError> {
    let issuer = env.text("PROBACTR_OIDC_ISSUER").trim().to_owned();
    let client_id = env.text("PROBACTR_OIDC_CLIENT_ID").trim().to_owned();
    let client_secret = Some(env.text("PROBACTR_OIDC_CLIENT_SECRET")).filter(|s| !s.is_empty());
    let role_map_text = env.text("PROBACTR_OIDC_ROLE_MAP");
    let role_map = RoleMap::parse(&role_map_text)
        .map_err(|why| Env::invalid("PROBACTR_OIDC_ROLE_MAP", &role_map_text, &why))?;
    if issuer.is_empty() {
        for (var, set) in [
            ("PROBACTR_OIDC_CLIENT_ID", !client_id.is_empty()),
            ("PROBACTR_OIDC_CLIENT_SECRET", client_secret.is_some()),
            ("PROBACTR_OIDC_ROLE_MAP", !role_map.entries.is_empty()),
        ] {
            if set {
                return Err(ConfigError::Inconsistent {
                    var,
                    message: "is set but PROBACTR_OIDC_ISSUER is empty (single sign-on is off)".into(),
                });
            }
        }
        return Ok(None);
    }
    let expected = "the provider's issuer URL, https://… (http:// only on this machine: localhost, 127.x, [::1]), without query or fragment";
    let host = host_of(&issuer).ok_or_else(|| Env::invalid("PROBACTR_OIDC_ISSUER", &issuer, expected))?;
    let secure = issuer.starts_with("https://");
    let local = issuer.starts_with("http://") && is_loopback(host);
    if !(secure || local) || issuer.contains(['?', '#', ' ']) {
        return Err(Env::invalid("PROBACTR_OIDC_ISSUER", &issuer, expected));
    }
    if client_id.is_empty() {
        return Err(ConfigError::Inconsistent {
            var: "PROBACTR_OIDC_CLIENT_ID",
            message: "must be set when PROBACTR_OIDC_ISSUER is (the client id the provider gave the manager)"
                .into(),
        });
    }
    let groups_claim = env.text("PROBACTR_OIDC_GROUPS_CLAIM").trim().to_owned();
    if groups_claim.is_empty() {
        return Err(Env::invalid(
            "PROBACTR_OIDC_GROUPS_CLAIM",
            &groups_claim,
            "the name of the claim listing a user's groups, e.g. groups",
        ));
    }
    let scopes_text = env.text("PROBACTR_OIDC_SCOPES");
    let scopes: Vec<String> = scopes_text
        .split([' ', ','])
        .filter(|s| !s.is_empty() && *s != "openid")
        .map(str::to_owned)
        .collect();
    if let Some(bad) = scopes
        .iter()
        .find(|s| !s.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '\\'))
    {
        return Err(Env::invalid(
            "PROBACTR_OIDC_SCOPES",
            &scopes_text,
            &format!("scope names separated by spaces ({bad:?} is not one)"),
        ));
    }
    let name = match env.text("PROBACTR_OIDC_NAME").trim() {
        "" => host.to_owned(),
        name => name.to_owned(),
    };
    Ok(Some(OidcSettings {
        issuer,
        client_id,
        client_secret,
        scopes,
        groups_claim,
        role_map,
        name,
    }))
}

/// Reads `PROBACTR_LOCAL_LOGIN` and `PROBACTR_BREAK_GLASS_USER`. Turning password logins
/// off needs single sign-on (`oidc_on`) and a break-glass user, so that a provider that
/// is down or misconfigured never locks every administrator out.
pub(super) fn local_login(env: &Env<'_>, oidc_on: bool) -> Result<LocalLogin, ConfigError> {
    let open = env.flag("PROBACTR_LOCAL_LOGIN")?;
    let break_glass = env.text("PROBACTR_BREAK_GLASS_USER").trim().to_owned();
    if open {
        return Ok(LocalLogin::Open);
    }
    if !oidc_on {
        return Err(ConfigError::Inconsistent {
            var: "PROBACTR_LOCAL_LOGIN",
            message: "is false but PROBACTR_OIDC_ISSUER is empty: nobody could log in".into(),
        });
    }
    if break_glass.is_empty() {
        return Err(ConfigError::Inconsistent {
            var: "PROBACTR_BREAK_GLASS_USER",
            message: "must name a cluster admin when PROBACTR_LOCAL_LOGIN is false (the one password login left, for when the provider is down)".into(),
        });
    }
    Ok(LocalLogin::BreakGlassOnly(break_glass))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_role_map_parses_its_three_forms() {
        let map =
            RoleMap::parse("team-pay:payments=operator, platform:*=admin,ops:cluster_admin,a:b:c=viewer")
                .expect("valid");
        assert_eq!(
            map.entries,
            vec![
                (
                    "team-pay".to_owned(),
                    Grant::Namespace {
                        namespace: "payments".into(),
                        role: Role::Operator
                    }
                ),
                ("platform".to_owned(), Grant::Everywhere(Role::Admin)),
                ("ops".to_owned(), Grant::ClusterAdmin),
                (
                    "a:b".to_owned(),
                    Grant::Namespace {
                        namespace: "c".into(),
                        role: Role::Viewer
                    }
                ),
            ]
        );
        assert_eq!(RoleMap::parse("").expect("empty"), RoleMap::default());
    }

    #[test]
    fn a_bad_role_map_entry_is_named() {
        for (text, says) in [
            ("team-pay", "no `:`"),
            (":payments=admin", "no group"),
            ("team:payments", "NAMESPACE=ROLE"),
            ("team:payments=root", "viewer, operator or admin"),
            ("team:=admin", "no namespace"),
        ] {
            let err = RoleMap::parse(text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn groups_give_the_highest_role_per_namespace() {
        let map = RoleMap::parse(
            "team-pay:payments=operator,readers:*=viewer,pay-admins:payments=admin,ops:cluster_admin,x:gone=admin",
        )
        .expect("valid");
        let existing = names(&["default", "payments", "reports"]);
        let grants = map.grant(&names(&["team-pay", "readers"]), &existing);
        assert!(!grants.cluster_admin);
        assert_eq!(
            grants.namespaces,
            BTreeMap::from([
                ("default".to_owned(), Role::Viewer),
                ("payments".to_owned(), Role::Operator),
                ("reports".to_owned(), Role::Viewer),
            ])
        );
        let grants = map.grant(&names(&["pay-admins", "team-pay", "ops", "x"]), &existing);
        assert!(grants.cluster_admin);
        assert_eq!(
            grants.namespaces,
            BTreeMap::from([("payments".to_owned(), Role::Admin)])
        );
        assert_eq!(map.grant(&names(&["strangers"]), &existing), Grants::default());
        assert_eq!(map.unknown_namespaces(&existing), vec!["gone"]);
    }

    #[test]
    fn hosts_of_issuers() {
        assert_eq!(host_of("https://id.example.com/realms/x"), Some("id.example.com"));
        assert_eq!(host_of("http://127.0.0.1:3000"), Some("127.0.0.1"));
        assert_eq!(host_of("http://[::1]:3000/"), Some("[::1]"));
        assert_eq!(host_of("https:///x"), None);
    }
}
