//! The account a shell job runs as.
//!
//! By default a job runs as the executor's own account. `PROBACTR_JOB_USER` names another
//! one (`NAME` or `UID:GID`) for every job of the executor, and a job may name its own
//! (`spec.run_as`) from `PROBACTR_JOB_USERS_ALLOWED`. A job under another account cannot
//! read the executor's `/proc` files, its configuration or its neighbours' working
//! directories, and cannot signal it.
//!
//! Accounts are resolved once, at start-up ([`configure`]): a name is looked up in the
//! machine's user database (its groups with it), and the executor checks it holds what
//! switching needs — `CAP_SETUID` and `CAP_SETGID` to become the account, `CAP_KILL` to
//! stop its processes, `CAP_CHOWN`, `CAP_DAC_OVERRIDE` and `CAP_FOWNER` to prepare and
//! remove the run's directory. When it cannot, it refuses to start and says what is
//! missing, rather than fail every run later. The switch itself happens in the child
//! between fork and exec ([`super::shell`]).

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

use probactr_common::account::AccountName;
use probactr_common::config::Config;

/// A resolved account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// As configured (`batch`, `1000:1000`).
    pub name: AccountName,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Every group, the primary one included.
    pub groups: Vec<u32>,
    /// The home directory (`HOME` of its jobs), when the user database knows one.
    pub home: Option<PathBuf>,
}

/// Why an account cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// The name is not in the user database.
    #[error("no user named {0:?} on this machine")]
    UnknownUser(String),
    /// Switching needs capabilities the executor lacks.
    #[error("running jobs as {account} needs the capabilities {missing} (run the executor as root, or grant them)")]
    NotPermitted {
        /// The account.
        account: String,
        /// The missing capabilities, comma-separated.
        missing: String,
    },
    /// A job names an account the executor does not allow.
    #[error("run_as {0:?} is not among PROBACTR_JOB_USERS_ALLOWED of this executor")]
    NotAllowed(String),
}

/// The accounts of this executor.
#[derive(Debug, Clone, Default)]
pub struct Accounts {
    /// `PROBACTR_JOB_USER`, resolved.
    default: Option<Account>,
    /// `PROBACTR_JOB_USERS_ALLOWED`, resolved, by name as written.
    allowed: HashMap<AccountName, Account>,
}

static ACCOUNTS: OnceLock<Accounts> = OnceLock::new();

/// Resolves and checks the configured accounts, once at start-up. Without it every job
/// runs as the executor's account and none may name another.
pub fn configure(config: &Config) -> Result<(), (&'static str, AccountError)> {
    let default = match &config.job_user {
        Some(name) => Some(resolve(name).map_err(|err| ("PROBACTR_JOB_USER", err))?),
        None => None,
    };
    let mut allowed = HashMap::new();
    for name in &config.job_users_allowed {
        let account = resolve(name).map_err(|err| ("PROBACTR_JOB_USERS_ALLOWED", err))?;
        allowed.insert(name.clone(), account);
    }
    if ACCOUNTS.set(Accounts { default, allowed }).is_err() {
        tracing::warn!("the accounts jobs run as were already configured");
    }
    Ok(())
}

/// The account a job runs as: its `run_as` when allowed, else `PROBACTR_JOB_USER`, else
/// none (the executor's own).
pub fn for_job(run_as: Option<&AccountName>) -> Result<Option<Account>, AccountError> {
    let accounts = ACCOUNTS.get_or_init(Accounts::default);
    match run_as {
        Some(name) => accounts
            .allowed
            .get(name)
            .cloned()
            .map(Some)
            .ok_or_else(|| AccountError::NotAllowed(name.to_string())),
        None => Ok(accounts.default.clone()),
    }
}

/// Looks an account up and checks that this process may switch to it.
pub fn resolve(name: &AccountName) -> Result<Account, AccountError> {
    let account = match name {
        AccountName::Ids { uid, gid } => Account {
            name: name.clone(),
            uid: *uid,
            gid: *gid,
            groups: vec![*gid],
            home: None,
        },
        AccountName::User(user) => look_up(user)?,
    };
    let missing = missing_capabilities(&account);
    if missing.is_empty() {
        Ok(account)
    } else {
        Err(AccountError::NotPermitted {
            account: name.to_string(),
            missing: missing.join(", "),
        })
    }
}

/// Whether `account` is this process's own (switching to it needs nothing).
#[allow(unsafe_code)]
pub fn is_own(account: &Account) -> bool {
    // SAFETY: geteuid and getegid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    account.uid == uid && account.gid == gid
}

/// The capabilities (by name) running jobs as `account` needs and this process lacks.
fn missing_capabilities(account: &Account) -> Vec<&'static str> {
    if is_own(account) {
        return Vec::new();
    }
    const NEEDED: &[(u32, &str)] = &[
        (7, "CAP_SETUID"),
        (6, "CAP_SETGID"),
        (5, "CAP_KILL"),
        (0, "CAP_CHOWN"),
        (1, "CAP_DAC_OVERRIDE"),
        (3, "CAP_FOWNER"),
    ];
    let effective = effective_capabilities();
    NEEDED
        .iter()
        .filter(|(bit, _)| effective & (1_u64 << bit) == 0)
        .map(|(_, name)| *name)
        .collect()
}

/// The effective capability set, from `/proc/self/status` (none when unreadable).
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// A user's ids, groups and home from the user database.
#[allow(unsafe_code)]
fn look_up(user: &str) -> Result<Account, AccountError> {
    let unknown = || AccountError::UnknownUser(user.to_owned());
    let c_user = CString::new(user).map_err(|_| unknown())?;
    let mut buffer = vec![0_u8; 16 * 1024];
    // SAFETY: passwd is plain data; zeroed is a valid (empty) value for it.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the name is NUL-terminated, the buffer
    // is as long as said, and `entry`/`result` live across it. The strings `entry` points
    // to live in `buffer`, which outlives their use below.
    let status = unsafe {
        libc::getpwnam_r(
            c_user.as_ptr(),
            &mut entry,
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            &mut result,
        )
    };
    if status != 0 || result.is_null() {
        return Err(unknown());
    }
    let home = (!entry.pw_dir.is_null()).then(|| {
        // SAFETY: pw_dir points to a NUL-terminated string inside `buffer`.
        let dir = unsafe { CStr::from_ptr(entry.pw_dir) };
        PathBuf::from(dir.to_string_lossy().into_owned())
    });
    let (uid, gid) = (entry.pw_uid, entry.pw_gid);
    Ok(Account {
        name: AccountName::User(user.to_owned()),
        uid,
        gid,
        groups: groups_of(&c_user, gid),
        home,
    })
}

/// The groups of a user, its primary group first.
#[allow(unsafe_code)]
fn groups_of(user: &CStr, gid: u32) -> Vec<u32> {
    let mut count: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; usize::try_from(count).unwrap_or(64)];
        let asked = count;
        // SAFETY: the buffer holds `count` group ids, as the call is told.
        let found = unsafe { libc::getgrouplist(user.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if found >= 0 {
            groups.truncate(usize::try_from(count).unwrap_or(0));
            if !groups.contains(&gid) {
                groups.insert(0, gid);
            }
            return groups;
        }
        if count <= asked {
            // The call failed without asking for more room: the primary group alone.
            return vec![gid];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_by_name_resolves_with_its_groups() {
        let root = resolve(&AccountName::User("root".into()));
        // Only root may switch to root from root; as another user the error names what
        // is missing, which is also a correct answer.
        match root {
            Ok(account) => {
                assert_eq!((account.uid, account.gid), (0, 0));
                assert!(account.groups.contains(&0));
            }
            Err(err) => assert!(matches!(err, AccountError::NotPermitted { .. }), "{err}"),
        }
    }

    #[test]
    fn an_unknown_user_is_named() {
        let err = resolve(&AccountName::User("no-such-user-probactr".into())).expect_err("unknown");
        assert_eq!(err, AccountError::UnknownUser("no-such-user-probactr".into()));
    }
}
