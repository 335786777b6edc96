//! What a caller may do, namespace by namespace: the user's grant (cluster admin flag and a
//! role per namespace), narrowed by the scope of the API token they came with.
//!
//! Isolation rule: an object in a namespace where the caller has no role does not exist
//! for them (404, never 403, and never listed or counted); a role too low for an action
//! is a 403 naming the role.

use std::collections::BTreeMap;

use probactr_common::model::Role;
use probactr_common::store::user_roles::Grant;

use crate::error::ApiError;

/// The order of the roles: each may do what the ones before it may.
pub fn rank(role: Role) -> u8 {
    match role {
        Role::Viewer => 0,
        Role::Operator => 1,
        Role::Admin => 2,
    }
}

/// The lower of two roles.
pub fn min_role(a: Role, b: Role) -> Role {
    if rank(a) <= rank(b) {
        a
    } else {
        b
    }
}

/// The scope of an API token: the namespaces it acts in (None: every one its user may
/// see) and the most it may do there (None: its user's role).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenScope {
    /// The namespaces named at its creation.
    pub namespaces: Option<Vec<String>>,
    /// The role named at its creation.
    pub role: Option<Role>,
}

impl TokenScope {
    /// Whether the token is scoped at all (a scoped token is never a cluster admin).
    pub fn is_scoped(&self) -> bool {
        self.namespaces.is_some() || self.role.is_some()
    }
}

/// The caller's effective rights.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Manages users, namespaces, executors and cluster-wide settings; an admin in every
    /// namespace.
    pub cluster_admin: bool,
    /// The role in each namespace where the caller has one (a cluster admin's own roles
    /// are kept here but do not limit them).
    pub roles: BTreeMap<String, Role>,
    /// Whether these rights come from a scoped token (which may not make tokens: a new
    /// one could be wider than itself).
    pub scoped: bool,
}

impl Access {
    /// The rights of a user's grant, narrowed by `scope` when the caller came with a
    /// scoped token; `all_namespaces` is every namespace (what a cluster admin's scoped
    /// token may name).
    pub fn new(grant: Grant, scope: &TokenScope, all_namespaces: &[String]) -> Access {
        if !scope.is_scoped() {
            return Access {
                cluster_admin: grant.cluster_admin,
                roles: grant.roles,
                scoped: false,
            };
        }
        let own: BTreeMap<String, Role> = if grant.cluster_admin {
            all_namespaces
                .iter()
                .map(|name| (name.clone(), Role::Admin))
                .collect()
        } else {
            grant.roles
        };
        let roles = own
            .into_iter()
            .filter(|(name, _)| scope.namespaces.as_ref().is_none_or(|only| only.contains(name)))
            .map(|(name, role)| (name, scope.role.map_or(role, |cap| min_role(role, cap))))
            .collect();
        Access {
            cluster_admin: false,
            roles,
            scoped: true,
        }
    }

    /// The caller's role in `namespace` (None: the namespace and all in it are invisible
    /// to them).
    pub fn role_in(&self, namespace: &str) -> Option<Role> {
        if self.cluster_admin {
            Some(Role::Admin)
        } else {
            self.roles.get(namespace).copied()
        }
    }

    /// Whether the caller sees `namespace`.
    pub fn sees(&self, namespace: &str) -> bool {
        self.role_in(namespace).is_some()
    }

    /// The namespaces the caller sees, for filtering lists (None: every one, for a
    /// cluster admin).
    pub fn visible(&self) -> Option<Vec<String>> {
        (!self.cluster_admin).then(|| self.roles.keys().cloned().collect())
    }

    /// The namespaces a list shows: the one asked for (when the caller sees it; nothing
    /// otherwise, exactly as for a namespace that does not exist), or every visible one.
    pub fn listing(&self, asked: Option<&str>) -> Option<Vec<String>> {
        match asked {
            Some(name) if self.sees(name) => Some(vec![name.to_owned()]),
            Some(_) => Some(Vec::new()),
            None => self.visible(),
        }
    }

    /// The highest role the caller has anywhere (None: no role at all).
    pub fn best_role(&self) -> Option<Role> {
        if self.cluster_admin {
            return Some(Role::Admin);
        }
        self.roles.values().copied().max_by_key(|role| rank(*role))
    }

    /// The caller's role in `namespace`, or a 404 for the object `what` `id` in it.
    pub fn role_for(&self, namespace: &str, what: &'static str, id: impl ToString) -> Result<Role, ApiError> {
        self.role_in(namespace)
            .ok_or_else(|| ApiError::not_found(what, id))
    }

    /// 403 unless the caller is a cluster admin.
    pub fn require_cluster_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.cluster_admin {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!("only a cluster admin may {what}")))
        }
    }
}

/// Ok when `allowed`, else a 403 saying what `role` may not do in `namespace`.
pub fn require(role: Role, namespace: &str, allowed: bool, what: &str) -> Result<(), ApiError> {
    if allowed {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "the {role} role in namespace {namespace} may not {what}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(cluster_admin: bool, roles: &[(&str, Role)]) -> Grant {
        Grant {
            cluster_admin,
            roles: roles.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect(),
        }
    }

    #[test]
    fn a_scoped_token_never_exceeds_its_user_nor_its_scope() {
        let all = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let user = grant(false, &[("a", Role::Operator), ("b", Role::Admin)]);
        let scope = TokenScope {
            namespaces: Some(vec!["a".into(), "c".into()]),
            role: Some(Role::Admin),
        };
        let access = Access::new(user.clone(), &scope, &all);
        assert_eq!(access.role_in("a"), Some(Role::Operator));
        assert_eq!(access.role_in("b"), None);
        assert_eq!(access.role_in("c"), None);
        let capped = Access::new(
            user,
            &TokenScope {
                namespaces: None,
                role: Some(Role::Viewer),
            },
            &all,
        );
        assert_eq!(capped.role_in("b"), Some(Role::Viewer));
        let admin = Access::new(grant(true, &[]), &scope, &all);
        assert!(!admin.cluster_admin);
        assert_eq!(admin.role_in("c"), Some(Role::Admin));
        assert_eq!(admin.role_in("b"), None);
        assert_eq!(
            Access::new(grant(true, &[]), &TokenScope::default(), &all).visible(),
            None
        );
    }
}
