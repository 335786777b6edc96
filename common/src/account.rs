//! The account a shell job runs as, as written in settings and job specs: a user name
//! (`batch`), looked up on the executor's machine, or numeric ids (`1000:1000`), which
//! need no entry in the machine's user database (the usual case in containers).

use std::fmt;

/// An account as written: `NAME` or `UID:GID`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AccountName {
    /// A user name, resolved by the executor (its groups included).
    User(String),
    /// A user id and a group id, used as they are.
    Ids {
        /// The user id.
        uid: u32,
        /// The primary (and only) group id.
        gid: u32,
    },
}

/// What an account must look like, for error messages.
pub const EXPECTED: &str =
    "a user name (letters, digits, `_`, `-`, `.`, not starting with `-`) or UID:GID such as 1000:1000";

impl AccountName {
    /// Parses `NAME` or `UID:GID`; the error says what was expected.
    pub fn parse(text: &str) -> Result<AccountName, String> {
        let text = text.trim();
        if let Some((uid, gid)) = text.split_once(':') {
            return match (uid.parse(), gid.parse()) {
                (Ok(uid), Ok(gid)) => Ok(AccountName::Ids { uid, gid }),
                _ => Err(EXPECTED.to_owned()),
            };
        }
        let valid = !text.is_empty()
            && text.len() <= 32
            && !text.starts_with('-')
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if valid {
            Ok(AccountName::User(text.to_owned()))
        } else {
            Err(EXPECTED.to_owned())
        }
    }
}

impl fmt::Display for AccountName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccountName::User(name) => f.write_str(name),
            AccountName::Ids { uid, gid } => write!(f, "{uid}:{gid}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_parse_and_print_as_written() {
        assert_eq!(AccountName::parse("batch"), Ok(AccountName::User("batch".into())));
        assert_eq!(
            AccountName::parse("1000:100"),
            Ok(AccountName::Ids { uid: 1000, gid: 100 })
        );
        assert_eq!(
            AccountName::parse(" 1000:100 ").map(|a| a.to_string()),
            Ok("1000:100".into())
        );
        for bad in ["", "-rf", "a b", "1000:", ":1", "x:y", "root;id"] {
            assert!(AccountName::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
