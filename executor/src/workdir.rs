//! Working directories of shell runs: a fresh, private one per attempt, removed after it.
//!
//! A job that writes into a shared directory (the executor's own working directory, `/tmp`)
//! can read what the previous run left, or leave something for the next one. So every
//! shell attempt gets a directory of its own, owned by the account it runs as and closed
//! to everyone else (mode 0700), as its working directory (unless its spec names `cwd`)
//! and as the home of its checkpoint file; the directory is removed when the attempt ends.
//!
//! # Layout
//!
//! ```text
//! PROBACTR_WORK_DIR (the system's temporary directory when unset) / probactr-work /
//!   executor-<pid>-<random>/     one per executor process, 0711, holding `.lock`
//!     run-<run id>-<attempt>/    the job's working directory, 0700, the job's account
//!     checkpoint-<run id>-<attempt>/
//! ```
//!
//! # What a killed executor leaves
//!
//! An executor killed with SIGKILL (or whose machine lost power) removes nothing. Each
//! executor holds an exclusive `flock` on its `.lock` for as long as it lives, which the
//! kernel releases when it dies however it dies. At start-up an executor removes every
//! sibling whose lock it can take: its owner is gone. Executors sharing a machine and a
//! work directory never remove each other's live directories. A directory becomes
//! visible under its final name only once its lock is held, so a starting neighbour
//! cannot mistake it for a dead one.

use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::job::account::Account;

/// The folder under `PROBACTR_WORK_DIR` that holds executors' areas.
const AREA_ROOT: &str = "probactr-work";

/// This executor's area: its directory and the lock that says it is alive.
struct Area {
    dir: PathBuf,
    /// Held (locked) for the life of the process; never read.
    _lock: File,
}

static AREA: OnceLock<Result<Area, String>> = OnceLock::new();

/// Makes this executor's area under `base` (the system's temporary directory when None)
/// and removes what dead executors left there. Called at start-up; the first shell run
/// does it otherwise (with the default base).
pub fn init(base: Option<&Path>) -> io::Result<PathBuf> {
    let area = AREA.get_or_init(|| make_area(base).map_err(|err| err.to_string()));
    match area {
        Ok(area) => Ok(area.dir.clone()),
        Err(why) => Err(io::Error::other(why.clone())),
    }
}

fn area_dir() -> io::Result<PathBuf> {
    init(None)
}

fn make_area(base: Option<&Path>) -> io::Result<Area> {
    let root = base
        .map_or_else(std::env::temp_dir, Path::to_path_buf)
        .join(AREA_ROOT);
    DirBuilder::new().recursive(true).mode(0o711).create(&root)?;
    // Job accounts must traverse it to reach their own directory (never list it).
    fs::set_permissions(&root, fs::Permissions::from_mode(0o711))?;
    let suffix: u32 = rand::random();
    let building = root.join(format!(".building-{}-{suffix:08x}", std::process::id()));
    DirBuilder::new().mode(0o711).create(&building)?;
    fs::set_permissions(&building, fs::Permissions::from_mode(0o711))?;
    let lock = File::create(building.join(".lock"))?;
    if !try_lock(&lock)? {
        return Err(io::Error::other("cannot lock a directory just made"));
    }
    let dir = root.join(format!("executor-{}-{suffix:08x}", std::process::id()));
    fs::rename(&building, &dir)?;
    remove_left_behind(&root, &dir);
    tracing::info!(dir = %dir.display(), "shell runs work in fresh directories here");
    Ok(Area { dir, _lock: lock })
}

/// Removes the areas of executors that are gone (their lock is free), and directories
/// that never became an area (a start-up killed half-way).
fn remove_left_behind(root: &Path, ours: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == ours {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let dead = if name.starts_with("executor-") {
            // Renamed so only once its lock was held: a free lock means its owner is gone.
            owner_is_gone(&path)
        } else {
            // A neighbour starting at the same moment makes its `.building-*` before the
            // lock inside it exists or is held: only one that stayed half-made for a
            // while is a start-up killed half-way.
            name.starts_with(".building-") && older_than(&path, HALF_MADE_AGE) && owner_is_gone(&path)
        };
        if dead {
            match fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(dir = %path.display(), "removed what a stopped executor left behind")
                }
                Err(err) => {
                    tracing::warn!(dir = %path.display(), error = %err, "cannot remove what a stopped executor left behind")
                }
            }
        }
    }
}

/// How long a neighbour may take to turn its `.building-*` directory into its area.
const HALF_MADE_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// True when `path` was last changed more than `age` ago (false when that is unknown).
fn older_than(path: &Path, age: std::time::Duration) -> bool {
    fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|elapsed| elapsed > age)
}

/// True when nobody holds the area's lock (or it has none).
fn owner_is_gone(area: &Path) -> bool {
    match File::open(area.join(".lock")) {
        Ok(lock) => try_lock(&lock).unwrap_or(false),
        Err(err) => err.kind() == io::ErrorKind::NotFound,
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: true when taken.
#[allow(unsafe_code)]
fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock takes a descriptor we own and an integer.
    let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if result == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// A directory of one attempt, removed when dropped.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Makes `<kind>-<run id>-<attempt>` in this executor's area, 0700, owned by
    /// `account` (the executor's own when None).
    pub fn create(kind: &str, run_id: i64, attempt: i32, account: Option<&Account>) -> io::Result<RunDir> {
        let path = area_dir()?.join(format!("{kind}-{run_id}-{attempt}"));
        if path.exists() {
            // A retry of the same attempt number in this process: start clean.
            fs::remove_dir_all(&path)?;
        }
        DirBuilder::new().mode(0o700).create(&path)?;
        let dir = RunDir { path };
        if let Some(account) = account {
            std::os::unix::fs::chown(&dir.path, Some(account.uid), Some(account.gid))?;
        }
        Ok(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(err) = fs::remove_dir_all(&self.path) {
            if err.kind() != io::ErrorKind::NotFound {
                tracing::warn!(dir = %self.path.display(), error = %err, "cannot remove a run's directory");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_executors_area_is_removed_and_a_live_ones_kept() {
        let base = tempfile::tempdir().expect("temp dir");
        let root = base.path().join(AREA_ROOT);
        fs::create_dir_all(&root).expect("root");
        let dead = root.join("executor-1-dead");
        fs::create_dir_all(dead.join("run-7-1")).expect("dead area");
        File::create(dead.join(".lock")).expect("dead lock");
        let live = root.join("executor-2-live");
        fs::create_dir_all(&live).expect("live area");
        let held = File::create(live.join(".lock")).expect("live lock");
        assert!(try_lock(&held).expect("lock"));
        let ours = make_area(Some(base.path())).expect("area");
        assert!(!dead.exists(), "a dead executor's runs stay behind");
        assert!(live.exists(), "a live executor's area was removed");
        assert!(ours.dir.exists());
    }

    #[test]
    fn a_neighbour_still_making_its_area_is_left_alone() {
        let base = tempfile::tempdir().expect("temp dir");
        let root = base.path().join(AREA_ROOT);
        // Just made, its lock not yet created: what a neighbour starting now looks like.
        let starting = root.join(".building-1-00000001");
        fs::create_dir_all(&starting).expect("half-made area");
        make_area(Some(base.path())).expect("area");
        assert!(starting.exists(), "a starting neighbour's area was removed");
    }
}
