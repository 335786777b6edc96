//! What a verified ID token says about the user: who they are at the provider (issuer
//! and subject), the name they are given here at their first login, and their groups.

use openidconnect::core::CoreGenderClaim;
use openidconnect::{AdditionalClaims, IdTokenClaims};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most characters of a user name (the `users` table's limit).
pub const MAX_USERNAME_CHARS: usize = 100;

/// Every claim of an ID token or userinfo answer beyond the standard ones (the groups
/// claim's name is a setting, so it cannot be a field).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExtraClaims {
    /// The claims, by name.
    #[serde(flatten)]
    pub claims: Map<String, Value>,
}

impl AdditionalClaims for ExtraClaims {}

/// The user the provider vouches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The provider's issuer.
    pub issuer: String,
    /// The provider's stable id of the user (`sub`).
    pub subject: String,
    /// The name to give the user at their first login: `preferred_username`, else
    /// `email`, else the subject.
    pub username: String,
    /// The groups claim; None when the ID token has none (then userinfo is asked).
    pub groups: Option<Vec<String>>,
}

impl Identity {
    /// The identity in verified ID token claims, the groups read from `groups_claim`.
    pub fn from_id_token(
        issuer: &str,
        claims: &IdTokenClaims<ExtraClaims, CoreGenderClaim>,
        groups_claim: &str,
    ) -> Result<Identity, String> {
        let subject = claims.subject().as_str().to_owned();
        let preferred = claims.preferred_username().map(|name| name.as_str().to_owned());
        let email = claims.email().map(|email| email.as_str().to_owned());
        Ok(Identity {
            issuer: issuer.to_owned(),
            username: username_from(preferred.as_deref(), email.as_deref(), &subject),
            subject,
            groups: groups_in(claims.additional_claims(), groups_claim)?,
        })
    }
}

/// The user name from the first usable of the preferred name, the mail address and the
/// subject: trimmed, without control characters, at most [`MAX_USERNAME_CHARS`].
pub fn username_from(preferred: Option<&str>, email: Option<&str>, subject: &str) -> String {
    [preferred, email, Some(subject)]
        .into_iter()
        .flatten()
        .map(|name| {
            name.chars()
                .filter(|c| !c.is_control())
                .collect::<String>()
                .trim()
                .chars()
                .take(MAX_USERNAME_CHARS)
                .collect::<String>()
        })
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "sso-user".to_owned())
}

/// The groups in the claim `name`: a list of names, or one name (some providers send a
/// single group as a string); None when the claim is absent. Anything else is an error
/// naming the claim, not an empty list: a misconfigured provider must not silently take
/// every role away.
pub fn groups_in(extra: &ExtraClaims, name: &str) -> Result<Option<Vec<String>>, String> {
    match extra.claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(group)) => Ok(Some(vec![group.clone()])),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(group) => Ok(group.clone()),
                other => Err(format!("the claim {name:?} holds {other}, not a group name")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!(
            "the claim {name:?} is {other}, not a list of group names"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn extra(value: Value) -> ExtraClaims {
        serde_json::from_value(value).expect("claims")
    }

    #[test]
    fn groups_are_a_list_or_one_name() {
        let claims = extra(json!({"groups": ["a", "b"], "team": "pay", "bad": [1], "odd": {"x": 1}}));
        assert_eq!(
            groups_in(&claims, "groups"),
            Ok(Some(vec!["a".into(), "b".into()]))
        );
        assert_eq!(groups_in(&claims, "team"), Ok(Some(vec!["pay".into()])));
        assert_eq!(groups_in(&claims, "missing"), Ok(None));
        assert!(groups_in(&claims, "bad")
            .expect_err("not names")
            .contains("\"bad\""));
        assert!(groups_in(&claims, "odd").is_err());
    }

    #[test]
    fn the_user_name_is_the_first_usable_claim() {
        assert_eq!(username_from(Some(" alice "), Some("a@x"), "s1"), "alice");
        assert_eq!(username_from(Some("\u{7}"), Some("a@x"), "s1"), "a@x");
        assert_eq!(username_from(None, None, "s1"), "s1");
        assert_eq!(
            username_from(Some(&"x".repeat(300)), None, "s").chars().count(),
            MAX_USERNAME_CHARS
        );
    }
}
