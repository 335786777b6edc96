//! The command line: a scenario name and size flags.

/// Printed with every usage error.
pub const USAGE: &str = "usage: probactr-bench SCENARIO [options]

scenarios: throughput backlog fire-storm scale contention failover admin memory all
options:
  --jobs N             runs (throughput, contention) [20000 / 1000]
  --triggers T         interval triggers (fire-storm) [1000]
  --trigger-jobs J     jobs the triggers belong to, taken in turn (fire-storm) [1]
  --executors E        executor processes [2]
  --capacity C         PROBACTR_EXECUTOR_CAPACITY of each executor [the executor's default]
  --sizes A,B,C        runs queued at start (backlog) [2000,20000,200000]
  --duration SECONDS   measuring time (fire-storm, scale, admin) [10]
  --phase spread|aligned   instants spread over the second or all at once [spread]
  --parallel | --non-parallel   throughput: one parallel job, or one mutex per job [parallel]
  --retry SPEC         lock retry of the executors (contention): jitter:BASE:CAP or fixed:DELAY
  --trials K           failover trials [5]
  --stored N           stored triggers (scale) [1000000]
  --history N          runs of history under the manager (admin) [1000000]
  --beside-features    every second-wave feature configured on other jobs (quota,
                       pool, rate, selector, priority, children, alert rule, workflow,
                       parameters, trigger cap), none of which the measured runs use
  --tiny               every size small (smoke test)
  --json               one JSON object per scenario instead of a table

Settings in the bench's environment (PROBACTR_EXECUTOR_PREFETCH=0, say) reach the
processes it starts, but for those the options above set. BENCH_LOG (a RUST_LOG
filter, say probactr_executor::firing=debug) shows their logs; BENCH_KEEP (any value)
keeps each scenario's database, named on stderr, to read its runs afterwards.";

/// What to run and at which size.
#[derive(Debug, Clone)]
pub struct Options {
    pub scenario: String,
    pub jobs: Option<u64>,
    pub triggers: u64,
    pub trigger_jobs: u64,
    pub executors: u32,
    pub capacity: Option<u32>,
    pub sizes: Vec<u64>,
    pub duration: u64,
    pub aligned: bool,
    pub parallel: bool,
    pub retry: Option<String>,
    pub trials: u32,
    pub stored: u64,
    pub history: u64,
    pub beside_features: bool,
    pub tiny: bool,
    pub json: bool,
}

/// Every scenario `all` runs, in order.
pub const SCENARIOS: &[&str] = &[
    "throughput",
    "backlog",
    "fire-storm",
    "scale",
    "contention",
    "failover",
    "admin",
    "memory",
];

impl Options {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
        let mut args = args.into_iter();
        let scenario = args.next().ok_or("no scenario given")?;
        if scenario != "all" && !SCENARIOS.contains(&scenario.as_str()) {
            return Err(format!("unknown scenario {scenario:?}"));
        }
        let mut options = Options {
            scenario,
            jobs: None,
            triggers: 1000,
            trigger_jobs: 1,
            executors: 2,
            capacity: None,
            sizes: vec![2_000, 20_000, 200_000],
            duration: 10,
            aligned: false,
            parallel: true,
            retry: None,
            trials: 5,
            stored: 1_000_000,
            history: 1_000_000,
            beside_features: false,
            tiny: false,
            json: false,
        };
        while let Some(flag) = args.next() {
            let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
            match flag.as_str() {
                "--jobs" => options.jobs = Some(number(&value("--jobs")?, "--jobs")?),
                "--triggers" => options.triggers = number(&value("--triggers")?, "--triggers")?,
                "--trigger-jobs" => {
                    options.trigger_jobs = number(&value("--trigger-jobs")?, "--trigger-jobs")?
                }
                "--executors" => options.executors = number(&value("--executors")?, "--executors")? as u32,
                "--capacity" => options.capacity = Some(number(&value("--capacity")?, "--capacity")? as u32),
                "--sizes" => {
                    options.sizes = value("--sizes")?
                        .split(',')
                        .map(|size| number(size.trim(), "--sizes"))
                        .collect::<Result<_, _>>()?
                }
                "--duration" => options.duration = number(&value("--duration")?, "--duration")?,
                "--trials" => options.trials = number(&value("--trials")?, "--trials")? as u32,
                "--stored" => options.stored = number(&value("--stored")?, "--stored")?,
                "--history" => options.history = number(&value("--history")?, "--history")?,
                "--phase" => match value("--phase")?.as_str() {
                    "spread" => options.aligned = false,
                    "aligned" => options.aligned = true,
                    other => return Err(format!("--phase {other:?}: expected spread or aligned")),
                },
                "--retry" => options.retry = Some(value("--retry")?),
                "--parallel" => options.parallel = true,
                "--non-parallel" => options.parallel = false,
                "--beside-features" => options.beside_features = true,
                "--tiny" => options.tiny = true,
                "--json" => options.json = true,
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if options.executors == 0 {
            return Err("--executors must be at least 1".into());
        }
        if options.trigger_jobs == 0 {
            return Err("--trigger-jobs must be at least 1".into());
        }
        if options.tiny {
            options.shrink();
        }
        Ok(options)
    }

    fn shrink(&mut self) {
        self.jobs = Some(self.jobs.unwrap_or(200).min(200));
        self.triggers = self.triggers.min(50);
        self.duration = self.duration.min(3);
        self.trials = self.trials.min(1);
        self.stored = self.stored.min(5_000);
        self.history = self.history.min(5_000);
        self.sizes = vec![200, 2_000];
    }

    pub fn scenarios(&self) -> Vec<&'static str> {
        match SCENARIOS.iter().find(|s| **s == self.scenario) {
            Some(one) => vec![*one],
            None => SCENARIOS.to_vec(),
        }
    }
}

fn number(text: &str, flag: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{flag} {text:?}: expected a whole number"))
}
