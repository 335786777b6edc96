//! Shell runs contained in a cgroup (v2) of their own, where the executor has one to give.
//!
//! A process group (see the `shell` module) holds what a program forks until something
//! leaves it: `setsid`, a daemonising script, a double fork. And a grandchild outlives an
//! executor killed with SIGKILL. A cgroup holds every descendant, whatever it does (only
//! a process allowed to write another cgroup's `cgroup.procs` can move out: a job under
//! another account, `PROBACTR_JOB_USER`, cannot; one under the executor's own account
//! could, as it could signal the executor itself), and the kernel kills all of it at once
//! through `cgroup.kill`. So when the executor has a cgroup delegated to it, every shell
//! attempt runs in its own:
//!
//! ```text
//! PROBACTR_CGROUP (auto: the executor's own cgroup) /
//!   executor-<pid>-<random>/      one per executor process
//!     executor/                   the executor itself
//!     run-<run id>-<attempt>/     one per shell attempt, killed whole and removed at its end
//! ```
//!
//! - The child joins its attempt's cgroup between fork and exec, before it drops its
//!   privileges: nothing the job runs ever starts outside it.
//! - `limits.memory_mib` and `limits.processes` also become the cgroup's `memory.max`
//!   and `pids.max` where those controllers are available: they then bound the run's
//!   processes together, where rlimits bound each process (or account) alone. A run the
//!   kernel killed for its memory limit fails saying so.
//! - Whenever the attempt ends (exit, timeout, stop, an aborted task), its cgroup is
//!   killed whole and removed.
//! - The executor lives in a leaf of its own (`executor/`), because a cgroup holding
//!   processes cannot hand controllers to its children. At start-up an executor looks at
//!   its siblings: a node whose `executor/` leaf holds no process and whose executor
//!   process is gone (or has this executor's own pid: a restarted container's executor
//!   is often pid 1 again) belongs to a dead executor (killed, say, with SIGKILL, where
//!   none of its code ran); its runs' processes are killed and the node removed.
//!   Executors sharing one delegated cgroup never touch each other's live nodes (a node
//!   whose leaf is not made yet is left alone: its executor is starting).
//!
//! `PROBACTR_CGROUP=auto` (the default) uses the executor's own cgroup when it is
//! writable and not the hierarchy's root (a systemd service with `Delegate=yes`, a
//! container given a writable cgroup namespace); without one, runs keep process groups
//! alone, as with `off`. A path names the delegated cgroup itself: one that does not
//! exist, is not a cgroup v2 directory or cannot be written makes start-up refuse.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use probactr_common::config::CgroupSetting;
use probactr_common::jobspec::ProcessLimits;

/// The controllers runs' limits use, enabled for runs where the hierarchy offers them.
const CONTROLLERS: [&str; 2] = ["memory", "pids"];

/// How long a killed cgroup may take to empty before we stop waiting for it.
const EMPTY_WITHIN: Duration = Duration::from_secs(5);

/// Why a named cgroup cannot hold runs.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct CgroupError {
    path: String,
    why: String,
}

impl CgroupError {
    fn new(path: &Path, why: impl std::fmt::Display) -> Self {
        CgroupError {
            path: path.display().to_string(),
            why: why.to_string(),
        }
    }
}

/// How this executor contains its shell runs, as decided at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Each run in a cgroup under `node`, with these controllers enabled for them; `reaped`
    /// dead executors' nodes were removed at start-up.
    Cgroups {
        /// This executor's node.
        node: PathBuf,
        /// The controllers runs' limits use that are enabled for them.
        controllers: Vec<String>,
        /// How many dead executors' nodes were removed.
        reaped: usize,
    },
    /// Process groups alone, and why.
    ProcessGroups(String),
}

impl std::fmt::Display for Containment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Containment::Cgroups {
                node,
                controllers,
                reaped,
            } => write!(
                f,
                "shell runs get a cgroup each under {} (controllers: {}; dead executors' cgroups removed: {reaped})",
                node.display(),
                if controllers.is_empty() { "none".to_owned() } else { controllers.join(", ") }
            ),
            Containment::ProcessGroups(why) => write!(f, "shell runs are contained by process groups alone: {why}"),
        }
    }
}

/// This executor's node in the cgroup hierarchy.
struct Node {
    path: PathBuf,
    memory: bool,
    pids: bool,
}

static NODE: OnceLock<Node> = OnceLock::new();

/// Decides how shell runs are contained, makes this executor's node and moves the
/// process into it, removing what dead executors left. Call once at start-up, before
/// any run; an error (only for a named cgroup) means the executor must not start.
pub fn configure(setting: &CgroupSetting) -> Result<Containment, CgroupError> {
    let (base, named) = match setting {
        CgroupSetting::Off => return Ok(Containment::ProcessGroups("PROBACTR_CGROUP is off".into())),
        CgroupSetting::Path(path) => (path.clone(), true),
        CgroupSetting::Auto => match own_cgroup() {
            Ok(path) => (path, false),
            Err(why) => return Ok(Containment::ProcessGroups(why)),
        },
    };
    let made = check_cgroup_dir(&base).and_then(|()| make_node(&base).map_err(|err| err.to_string()));
    match made {
        Ok((node, reaped)) => {
            let containment = Containment::Cgroups {
                node: node.path.clone(),
                controllers: CONTROLLERS
                    .iter()
                    .zip([node.memory, node.pids])
                    .filter(|(_, on)| *on)
                    .map(|(name, _)| (*name).to_owned())
                    .collect(),
                reaped,
            };
            // A second call keeps the first node; the executor calls this once.
            let _ = NODE.set(node);
            Ok(containment)
        }
        Err(why) if named => Err(CgroupError::new(&base, why)),
        Err(why) => Ok(Containment::ProcessGroups(format!(
            "the executor's own cgroup {} cannot hold runs: {why}",
            base.display()
        ))),
    }
}

/// The executor's own cgroup directory, when it may be delegated to it.
fn own_cgroup() -> Result<PathBuf, String> {
    let membership = fs::read_to_string("/proc/self/cgroup")
        .map_err(|err| format!("cannot read /proc/self/cgroup: {err}"))?;
    let relative = membership
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or("the executor is in no cgroup v2 hierarchy")?;
    if relative == "/" {
        return Err("the executor is in its cgroup hierarchy's root, which is not delegated to it".into());
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| format!("cannot read /proc/self/mountinfo: {err}"))?;
    let (root, mount_point) = cgroup2_mount(&mountinfo).ok_or("no cgroup v2 hierarchy is mounted")?;
    mounted_path(relative, &root, &mount_point)
}

/// Where the cgroup `relative` (as `/proc/self/cgroup` names it) is found, given the
/// mount's root in the hierarchy and its mount point.
fn mounted_path(relative: &str, root: &str, mount_point: &str) -> Result<PathBuf, String> {
    // Whole components: a mount root `/a` does not contain `/ab`.
    let inside = Path::new(relative)
        .strip_prefix(root)
        .map_err(|_| format!("the executor's cgroup {relative} is outside the mounted hierarchy"))?;
    Ok(Path::new(mount_point).join(inside))
}

/// The root and mount point of the first cgroup2 mount in a `/proc/self/mountinfo` text.
fn cgroup2_mount(mountinfo: &str) -> Option<(String, String)> {
    mountinfo.lines().find_map(|line| {
        let (mount, filesystem) = line.split_once(" - ")?;
        if filesystem.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = mount.split_whitespace().skip(3);
        Some((fields.next()?.to_owned(), fields.next()?.to_owned()))
    })
}

/// A cgroup v2 directory this process may write.
fn check_cgroup_dir(path: &Path) -> Result<(), String> {
    if !path.is_dir() {
        return Err("not a directory".into());
    }
    if !path.join("cgroup.controllers").is_file() || !path.join("cgroup.procs").is_file() {
        return Err("not a cgroup v2 directory (no cgroup.controllers and cgroup.procs in it)".into());
    }
    if !writable(path) {
        return Err("the executor may not write it (delegate it to the executor's account)".into());
    }
    Ok(())
}

#[allow(unsafe_code)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(text) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access reads the NUL-terminated string we own and touches no other memory.
    unsafe { libc::access(text.as_ptr(), libc::W_OK) == 0 }
}

/// Removes dead executors' nodes under `base`, makes this executor's node with its
/// `executor/` leaf, moves the process there and enables the runs' controllers.
fn make_node(base: &Path) -> io::Result<(Node, usize)> {
    let reaped = remove_dead_nodes(base);
    let pid = std::process::id();
    let suffix: u32 = rand::random();
    let path = base.join(format!("executor-{pid}-{suffix:08x}"));
    fs::create_dir(&path)?;
    let leaf = path.join("executor");
    let moved = fs::create_dir(&leaf).and_then(|()| write_to(&leaf.join("cgroup.procs"), "0"));
    if let Err(err) = moved {
        let _ = fs::remove_dir(&leaf);
        let _ = fs::remove_dir(&path);
        return Err(io::Error::new(
            err.kind(),
            format!("cannot move the executor into {}: {err}", leaf.display()),
        ));
    }
    // Best effort: the delegated cgroup may hold other processes (then it cannot hand
    // controllers down), or not offer them; runs are contained and killed whole anyway.
    enable_controllers(base);
    enable_controllers(&path);
    let enabled = read_text(&path.join("cgroup.subtree_control")).unwrap_or_default();
    let has = |name: &str| enabled.split_whitespace().any(|on| on == name);
    let node = Node {
        memory: has("memory"),
        pids: has("pids"),
        path,
    };
    Ok((node, reaped))
}

fn enable_controllers(cgroup: &Path) {
    let offered = read_text(&cgroup.join("cgroup.controllers")).unwrap_or_default();
    for name in CONTROLLERS {
        if offered.split_whitespace().any(|offer| offer == name) {
            if let Err(err) = write_to(&cgroup.join("cgroup.subtree_control"), &format!("+{name}")) {
                tracing::debug!(cgroup = %cgroup.display(), controller = name, %err, "cannot enable a controller");
            }
        }
    }
}

/// Removes the nodes of executors that died under `base`; how many.
fn remove_dead_nodes(base: &Path) -> usize {
    let Ok(entries) = fs::read_dir(base) else {
        return 0;
    };
    let mut reaped = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = node_pid(&name) else { continue };
        let path = entry.path();
        let leaf = path.join("executor");
        let own_pid = u32::try_from(pid).ok() == Some(std::process::id());
        if !leaf.is_dir() || !is_empty(&leaf) || (!own_pid && process_alive(pid)) {
            continue;
        }
        match remove_tree(&path) {
            Ok(()) => reaped += 1,
            Err(err) => eprintln!(
                "probactr-executor: cannot remove the cgroup {} a dead executor left: {err}",
                path.display()
            ),
        }
    }
    reaped
}

/// The executor pid a node's name carries (`executor-<pid>-<random>`).
fn node_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("executor-")?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

#[allow(unsafe_code)]
fn process_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Whether a cgroup and its descendants hold no process (a missing one holds none).
fn is_empty(cgroup: &Path) -> bool {
    match read_text(&cgroup.join("cgroup.events")) {
        Some(events) => !events.lines().any(|line| line.trim() == "populated 1"),
        None => read_text(&cgroup.join("cgroup.procs")).is_none_or(|procs| procs.trim().is_empty()),
    }
}

/// Kills every process of a cgroup and its descendants, and removes them, leaves first.
fn remove_tree(cgroup: &Path) -> io::Result<()> {
    kill_all(cgroup);
    wait_empty_blocking(cgroup);
    for entry in fs::read_dir(cgroup)?.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    fs::remove_dir(cgroup)
}

/// SIGKILL to every process of a cgroup: `cgroup.kill` (Linux 5.14), else one by one.
fn kill_all(cgroup: &Path) {
    if write_to(&cgroup.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in read_text(&cgroup.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
    {
        if let Ok(pid) = pid.parse::<i32>() {
            signal(pid, libc::SIGKILL);
        }
    }
}

#[allow(unsafe_code)]
fn signal(pid: i32, signal: i32) {
    if pid > 1 {
        // SAFETY: kill takes two integers and touches no memory.
        unsafe { libc::kill(pid, signal) };
    }
}

fn wait_empty_blocking(cgroup: &Path) {
    let deadline = Instant::now() + EMPTY_WITHIN;
    while !is_empty(cgroup) && Instant::now() < deadline {
        kill_all(cgroup);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_text(path: &Path) -> Option<String> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    Some(text)
}

/// A job limit the run's cgroup refused, naming the limit and the file.
fn limit_not_set(limit: &str, cgroup: &Path, err: io::Error) -> io::Error {
    io::Error::new(
        err.kind(),
        format!(
            "{limit}: cannot be set in the run's cgroup {}: {err}",
            cgroup.display()
        ),
    )
}

fn write_to(path: &Path, text: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The cgroup of one shell attempt: joined by the child before exec, killed whole and
/// removed at the attempt's end (or when dropped).
pub(super) struct RunCgroup {
    path: PathBuf,
    /// Its `cgroup.procs`, opened before the fork: the child writes "0" to it.
    procs: File,
    /// A `finish` began: a second one does nothing.
    finishing: AtomicBool,
    /// The cgroup is removed or handed to the background removal: nothing left for Drop
    /// (set only once `finish` got that far, so an attempt cancelled while finishing
    /// still has its cgroup killed and removed when dropped).
    done: AtomicBool,
}

impl RunCgroup {
    /// The attempt's cgroup with the spec's limits; None when runs get no cgroup.
    pub(super) fn create(run_id: i64, attempt: i32, limits: &ProcessLimits) -> io::Result<Option<RunCgroup>> {
        let Some(node) = NODE.get() else {
            return Ok(None);
        };
        let mut path = node.path.join(format!("run-{run_id}-{attempt}"));
        if path.exists() {
            // The same attempt again on this executor while its last cgroup is still
            // being removed: a name of its own.
            path = node
                .path
                .join(format!("run-{run_id}-{attempt}-{:08x}", rand::random::<u32>()));
        }
        let named = |err: io::Error| io::Error::new(err.kind(), format!("{}: {err}", path.display()));
        fs::create_dir(&path).map_err(named)?;
        let procs = OpenOptions::new().write(true).open(path.join("cgroup.procs"));
        let cgroup = RunCgroup {
            procs: procs.map_err(named)?,
            path: path.clone(),
            finishing: AtomicBool::new(false),
            done: AtomicBool::new(false),
        };
        if let (true, Some(mib)) = (node.memory, limits.memory_mib) {
            write_to(
                &cgroup.path.join("memory.max"),
                &mib.saturating_mul(1024 * 1024).to_string(),
            )
            .map_err(|err| limit_not_set("limits.memory_mib", &cgroup.path, err))?;
            // Swapping would only hide the limit.
            let _ = write_to(&cgroup.path.join("memory.swap.max"), "0");
        }
        if let (true, Some(processes)) = (node.pids, limits.processes) {
            write_to(&cgroup.path.join("pids.max"), &processes.to_string())
                .map_err(|err| limit_not_set("limits.processes", &cgroup.path, err))?;
        }
        Ok(Some(cgroup))
    }

    /// A descriptor of its `cgroup.procs` for the child to write "0" to, joining the
    /// cgroup: owned by the command, so it stays open until the fork however long the
    /// fork waits (a number borrowed from [`RunCgroup`] could be closed and reused by then).
    pub(super) fn procs_for_child(&self) -> io::Result<File> {
        self.procs.try_clone()
    }

    /// Kills whatever is left in the cgroup, waits for it to empty and removes it.
    /// True when the kernel killed a process of the run for its memory limit.
    pub(super) async fn finish(&self) -> bool {
        if self.finishing.swap(true, Ordering::SeqCst) {
            return false;
        }
        let oom_killed = self.oom_kills() > 0;
        kill_all(&self.path);
        let deadline = Instant::now() + EMPTY_WITHIN;
        while !is_empty(&self.path) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            kill_all(&self.path);
        }
        if fs::remove_dir(&self.path).is_err() {
            remove_in_background(self.path.clone());
        }
        self.done.store(true, Ordering::SeqCst);
        oom_killed
    }

    /// `oom_kill` of the cgroup's `memory.events` (0 without the memory controller).
    fn oom_kills(&self) -> u64 {
        read_text(&self.path.join("memory.events"))
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("oom_kill "))
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if self.done.swap(true, Ordering::SeqCst) {
            return;
        }
        // An attempt that never reached its end, or was cancelled while finishing (an
        // aborted task, a failed start, the runtime shutting down).
        kill_all(&self.path);
        remove_in_background(self.path.clone());
    }
}

/// Kills and removes a run's cgroup on a thread of its own, waiting for it to empty; what
/// stays (a process the kernel cannot kill) goes with this executor's node, removed by
/// the next executor.
fn remove_in_background(path: PathBuf) {
    let removal = std::thread::Builder::new()
        .name("probactr-cgroup-removal".into())
        .spawn({
            let path = path.clone();
            move || {
                if let Err(err) = remove_tree(&path) {
                    tracing::warn!(cgroup = %path.display(), %err,
                        "cannot remove a run's cgroup; the next executor removes it with this one's node");
                }
            }
        });
    if let Err(err) = removal {
        tracing::warn!(cgroup = %path.display(), %err,
            "cannot remove a run's cgroup; the next executor removes it with this one's node");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_is_found_under_its_mount_by_whole_components() {
        assert_eq!(
            mounted_path("/system.slice/probactr.service", "/", "/sys/fs/cgroup"),
            Ok(PathBuf::from("/sys/fs/cgroup/system.slice/probactr.service"))
        );
        assert_eq!(
            mounted_path("/docker/abc/sub", "/docker/abc", "/sys/fs/cgroup"),
            Ok(PathBuf::from("/sys/fs/cgroup/sub"))
        );
        assert!(mounted_path("/docker/abcd", "/docker/abc", "/sys/fs/cgroup").is_err());
    }

    #[test]
    fn the_cgroup2_mount_is_found_in_mountinfo() {
        let mountinfo = "\
24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
35 24 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            cgroup2_mount(mountinfo),
            Some(("/".to_owned(), "/sys/fs/cgroup/unified".to_owned()))
        );
        assert_eq!(cgroup2_mount("24 30 0:22 / /sys rw - sysfs sysfs rw"), None);
    }

    #[test]
    fn a_node_names_its_executors_pid() {
        assert_eq!(node_pid("executor-4242-0badf00d"), Some(4242));
        assert_eq!(node_pid("run-1-2"), None);
        assert_eq!(node_pid("executor-x-1"), None);
    }
}
