//! The executor's own process kept out of reach of the jobs it runs.
//!
//! A shell job is the executor's child. Without care it could read its parent's
//! environment (`/proc/$PPID/environ`: the database URL with its password, the Redis URL,
//! the secret key), its memory (`/proc/$PPID/mem`: every secret it opened) and its open
//! files (`/proc/$PPID/fd`). So before any job starts, the executor:
//!
//! - removes its secret settings from its environment and overwrites their text where
//!   the kernel shows it: `/proc/PID/environ` reads the block the process was started
//!   with, which removing a variable leaves in place;
//! - makes itself non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): the kernel then hands its
//!   `/proc` files (`environ`, `mem`, `fd`, `maps`, …) only to a process with
//!   `CAP_SYS_PTRACE`, not to another process of the same user.
//!
//! The limit: a job running as root has every capability and can read any process. Run
//! jobs under another account (`PROBACTR_JOB_USER`, see [`crate::job::account`]).
//!
//! Both steps change process-wide state and must run while the process has a single
//! thread, before the runtime starts: [`protect_process`] is the first thing `main` does
//! after reading its configuration.

use std::ffi::CStr;

use probactr_common::config::FILE_SETTINGS;

/// Scrubs the secret settings from the environment and makes the process non-dumpable.
/// Call it once, while the process has one thread. An error is returned when the kernel
/// refuses to make the process non-dumpable.
pub fn protect_process() -> std::io::Result<()> {
    scrub_environment(&secret_names());
    make_non_dumpable()
}

/// The settings whose values are secrets (and their `_FILE` forms, whose paths tell where
/// a secret lies).
fn secret_names() -> Vec<&'static str> {
    FILE_SETTINGS
        .iter()
        .flat_map(|&(name, file_var)| [name, file_var])
        // The output archive's credentials, read into the configuration before this.
        .chain(["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"])
        .collect()
}

/// Removes `names` from the environment and overwrites their original text with NULs.
#[allow(unsafe_code)]
fn scrub_environment(names: &[&str]) {
    for (pointer, len) in original_entries(names) {
        // SAFETY: the pointer and length describe a NUL-terminated `NAME=value` string of
        // the environment block, which is writable memory of this process; nothing holds
        // a reference to it (Rust copies values out of the environment), and the process
        // has one thread, so no other reader races with the write.
        unsafe { std::ptr::write_bytes(pointer, 0, len) };
    }
    for name in names {
        // SAFETY: called while the process has one thread (see the module docs), so no
        // other thread reads the environment at the same time.
        unsafe { std::env::remove_var(name) };
    }
}

/// Where the strings `NAME=value` of `names` lie in the environment, before removal.
#[allow(unsafe_code)]
fn original_entries(names: &[&str]) -> Vec<(*mut u8, usize)> {
    extern "C" {
        static mut environ: *const *const libc::c_char;
    }
    let mut found = Vec::new();
    // SAFETY: `environ` is the C library's NULL-terminated array of NUL-terminated
    // strings; it is only read here, while the process has one thread.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry);
            let bytes = text.to_bytes();
            let is_secret = names.iter().any(|name| {
                bytes.len() > name.len() && bytes.starts_with(name.as_bytes()) && bytes[name.len()] == b'='
            });
            if is_secret {
                found.push(((*entry).cast_mut().cast::<u8>(), bytes.len()));
            }
            entry = entry.add(1);
        }
    }
    found
}

/// `prctl(PR_SET_DUMPABLE, 0)`.
#[allow(unsafe_code)]
fn make_non_dumpable() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments touches no memory of ours.
    let result = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether the process is dumpable (false once [`protect_process`] ran).
#[allow(unsafe_code)]
pub fn is_dumpable() -> bool {
    // SAFETY: as above.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) == 1 }
}
