//! Measurements: machine-wide CPU time, process memory, percentiles, Redis command counts.

use std::time::Instant;

/// Busy CPU time of the whole machine (every process: executors, PostgreSQL, Redis,
/// this benchmark), from `/proc/stat`, without the time the hypervisor ran something
/// else (see [`machine_ticks`]).
#[derive(Debug, Clone, Copy)]
pub struct CpuClock {
    busy_ticks: u64,
    at: Instant,
}

impl CpuClock {
    pub fn now() -> CpuClock {
        CpuClock {
            busy_ticks: machine_ticks().busy,
            at: Instant::now(),
        }
    }

    /// Busy CPU milliseconds since this reading, and the wall seconds.
    pub fn since(&self) -> (f64, f64) {
        let ticks = machine_ticks().busy.saturating_sub(self.busy_ticks);
        // USER_HZ is 100 on Linux.
        (ticks as f64 * 10.0, self.at.elapsed().as_secs_f64())
    }
}

/// The machine's CPU ticks so far.
#[derive(Debug, Clone, Copy, Default)]
struct MachineTicks {
    /// Running anything: user, system, interrupts.
    busy: u64,
    /// Wanting to run while the hypervisor ran another guest. Not work of this machine:
    /// on a shared host it grows with the load and the neighbours (up to half of the
    /// "busy" time of some sittings), so it is reported beside, never in, the machine's
    /// CPU.
    steal: u64,
}

/// The first line of `/proc/stat`: user, nice, system, idle, iowait, irq, softirq,
/// steal.
fn machine_ticks() -> MachineTicks {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return MachineTicks::default();
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let field = |index: usize| fields.get(index).copied().unwrap_or(0);
    MachineTicks {
        busy: [0, 1, 2, 5, 6].into_iter().map(field).sum(),
        steal: field(7),
    }
}

/// CPU time by kind of process since a reading: the probactr processes of the cluster,
/// PostgreSQL (every `postgres` process, with the time of backends that exited, which
/// the postmaster collects), Redis, this benchmark, and the rest of the machine.
#[derive(Debug, Clone)]
pub struct CpuSplit {
    machine: u64,
    steal: u64,
    probactr: u64,
    postgres: u64,
    redis: u64,
    bench: u64,
    pids: Vec<u32>,
}

impl CpuSplit {
    /// A reading now; `pids` are the cluster's probactr processes.
    pub fn now(pids: &[u32]) -> CpuSplit {
        let by_name = |name: &str| -> u64 {
            processes_named(name)
                .into_iter()
                .map(|pid| process_ticks(pid, true))
                .sum()
        };
        let machine = machine_ticks();
        CpuSplit {
            machine: machine.busy,
            steal: machine.steal,
            probactr: pids.iter().map(|pid| process_ticks(*pid, false)).sum(),
            postgres: by_name("postgres"),
            redis: by_name("redis-server"),
            bench: process_ticks(std::process::id(), false),
            pids: pids.to_vec(),
        }
    }

    /// Milliseconds of CPU per unit of work (`units` runs or fires) since this reading,
    /// by kind, with the machine's total.
    pub fn per_unit_since(&self, units: f64) -> serde_json::Value {
        let now = CpuSplit::now(&self.pids);
        let ms = |before: u64, after: u64| after.saturating_sub(before) as f64 * 10.0;
        let machine = ms(self.machine, now.machine);
        let probactr = ms(self.probactr, now.probactr);
        let postgres = ms(self.postgres, now.postgres);
        let redis = ms(self.redis, now.redis);
        let bench = ms(self.bench, now.bench);
        let steal = ms(self.steal, now.steal);
        let other = (machine - probactr - postgres - redis - bench).max(0.0);
        let per = |value: f64| (value / units.max(1.0) * 10_000.0).round() / 10_000.0;
        serde_json::json!({
            "machine": per(machine),
            "probactr": per(probactr),
            "postgres": per(postgres),
            "redis": per(redis),
            "bench": per(bench),
            "other": per(other),
            "steal": per(steal),
        })
    }
}

/// Pids of the processes whose command name is `name`.
fn processes_named(name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == name)
        })
        .collect()
}

/// User and system clock ticks of a process (with its reaped children's when
/// `children`), from `/proc/<pid>/stat`; 0 when it is gone.
fn process_ticks(pid: u32, children: bool) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|field| field.parse().ok())
        .collect();
    let own = fields.iter().take(2).sum::<u64>();
    if children {
        own + fields.iter().skip(2).sum::<u64>()
    } else {
        own
    }
}

/// Resident memory of a process in MiB.
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

/// p50/p95/p99/max of `values` (sorted here), rounded to 0.1.
pub fn percentiles(values: &mut [f64]) -> serde_json::Value {
    values.sort_by(f64::total_cmp);
    let at = |p: f64| -> f64 {
        if values.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * (values.len() - 1) as f64).round() as usize;
        (values[rank.min(values.len() - 1)] * 10.0).round() / 10.0
    };
    serde_json::json!({ "p50": at(50.0), "p95": at(95.0), "p99": at(99.0), "max": at(100.0) })
}

/// Redis's count of processed commands (server-wide).
pub async fn redis_commands(redis_url: &str) -> anyhow::Result<u64> {
    let client = redis::Client::open(redis_url)?;
    let mut redis = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("INFO").arg("stats").query_async(&mut redis).await?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0))
}
