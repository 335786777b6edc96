// The peer in BENCHMARKS.md: BullMQ running the workloads of probactr-bench on the same
// machine and Redis, measured the same way (wall time, and CPU from /proc split by kind
// of process). One JSON object per measurement on stdout; progress on stderr.
//
//   node bench.mjs drain --jobs 20000 --workers 2 --concurrency 10
//   node bench.mjs backlog --workers 2 --concurrency 10 --sizes 2000,20000,200000
//   node bench.mjs fire-storm --triggers 1000 --phase aligned --duration 10 --workers 2 --concurrency 256
//
// Workers are separate processes (like probactr's executors), each one BullMQ Worker
// with `concurrency` slots and a processor that returns at once (probactr's `noop`).
// Completed jobs are removed (`removeOnComplete: true`), so Redis memory stays flat, as
// probactr's history does not slow its queue either.

import { fork } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
// BullMQ 6 takes a constructed client in ESM; workers need maxRetriesPerRequest: null.
const client = () => new IORedis(redisUrl, { maxRetriesPerRequest: null });

// ---------------------------------------------------------------------------------------
// CPU: busy ticks of the machine and of processes, from /proc (100 ticks a second).

// user, nice, system, idle, iowait, irq, softirq, steal: busy is the first three and the
// interrupts; steal (the hypervisor running another guest) is reported beside, as
// probactr-bench does.
function machineTicks() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  return { busy: fields[0] + fields[1] + fields[2] + fields[5] + fields[6], steal: fields[7] };
}

function processTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/);
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return 0;
  }
}

function pidsNamed(name) {
  return readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name;
    } catch {
      return false;
    }
  });
}

function cpuReading(workerPids) {
  const machine = machineTicks();
  return {
    machine: machine.busy,
    steal: machine.steal,
    workers: workerPids.reduce((sum, pid) => sum + processTicks(pid), 0),
    redis: pidsNamed('redis-server').reduce((sum, pid) => sum + processTicks(pid), 0),
    bench: processTicks(process.pid),
  };
}

function cpuPerUnit(before, after, units) {
  const ms = (key) => (after[key] - before[key]) * 10;
  const split = { machine: ms('machine'), workers: ms('workers'), redis: ms('redis'), bench: ms('bench') };
  split.other = Math.max(0, split.machine - split.workers - split.redis - split.bench);
  split.steal = ms('steal');
  return Object.fromEntries(Object.entries(split).map(([key, value]) => [key, round(value / Math.max(units, 1), 4)]));
}

const round = (value, places) => Math.round(value * 10 ** places) / 10 ** places;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function percentiles(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p) => (sorted.length ? round(sorted[Math.min(sorted.length - 1, Math.round((p / 100) * (sorted.length - 1)))], 1) : 0);
  return { p50: at(50), p95: at(95), p99: at(99), max: at(100) };
}

// ---------------------------------------------------------------------------------------
// Worker processes.

async function workerMain() {
  const { queue, prefix, concurrency, recordLag } = JSON.parse(process.env.PEER_WORKER);
  const lags = [];
  const worker = new Worker(
    queue,
    async (job) => {
      if (recordLag) {
        // The instant the job was due: its creation plus its delay (a scheduler's job is
        // created ahead of its instant, delayed until it).
        const due = job.timestamp + (job.opts.delay ?? 0);
        lags.push({ key: `${job.repeatJobKey ?? job.name}@${due}`, lag: Date.now() - due });
      }
    },
    { connection: client(), prefix, concurrency, removeOnComplete: { count: 0 } },
  );
  process.on('message', (message) => {
    if (message === 'stop') {
      // The figures first: closing a worker can wait long on its blocking connection,
      // and the process ends anyway.
      worker.pause(true);
      process.send({ lags }, () => process.exit(0));
    }
  });
  await worker.waitUntilReady();
  process.send({ ready: true });
}

function startWorkers(count, settings) {
  return Promise.all(
    Array.from({ length: count }, () => new Promise((resolve, reject) => {
      const child = fork(new URL(import.meta.url).pathname, ['worker'], {
        env: { ...process.env, PEER_WORKER: JSON.stringify(settings) },
      });
      child.once('message', (message) => (message.ready ? resolve(child) : reject(new Error('worker failed'))));
      child.once('error', reject);
    })),
  );
}

function stopWorkers(children) {
  return Promise.all(children.map((child) => new Promise((resolve) => {
    child.on('message', (message) => message.lags && resolve(message.lags));
    child.send('stop');
  })));
}

// ---------------------------------------------------------------------------------------
// Scenarios.

async function drain({ jobs, workers, concurrency }) {
  const name = `drain-${randomUUID().slice(0, 8)}`;
  const prefix = `peer-${name}`;
  const queue = new Queue(name, { connection: client(), prefix });
  for (let done = 0; done < jobs; done += 1000) {
    const chunk = Math.min(1000, jobs - done);
    await queue.addBulk(Array.from({ length: chunk }, (_, i) => ({ name: 'noop', data: { i: done + i }, opts: { removeOnComplete: true } })));
  }
  console.error(`  … ${jobs} jobs queued`);
  const children = await startWorkers(workers, { queue: name, prefix, concurrency, recordLag: false });
  const before = cpuReading(children.map((child) => child.pid));
  const started = performance.now();
  for (;;) {
    const counts = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
    if (Object.values(counts).every((count) => count === 0)) break;
    await sleep(20);
  }
  const seconds = (performance.now() - started) / 1000;
  const after = cpuReading(children.map((child) => child.pid));
  await stopWorkers(children);
  await queue.obliterate({ force: true });
  await queue.close();
  return {
    peer: 'bullmq', jobs, workers, concurrency,
    seconds: round(seconds, 2),
    runs_per_sec: Math.round(jobs / seconds),
    cpu_ms_per_run: cpuPerUnit(before, after, jobs),
    loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
  };
}

async function backlog({ sizes, workers, concurrency }) {
  const drains = [];
  for (const jobs of sizes) drains.push(await drain({ jobs, workers, concurrency }));
  const first = drains[0];
  const last = drains[drains.length - 1];
  return {
    peer: 'bullmq', drains,
    ratio_runs_per_sec: round(first.runs_per_sec / last.runs_per_sec, 2),
    ratio_cpu_per_run: round(last.cpu_ms_per_run.machine / first.cpu_ms_per_run.machine, 2),
  };
}

async function fireStorm({ triggers, phase, duration, workers, concurrency }) {
  const name = `storm-${randomUUID().slice(0, 8)}`;
  const prefix = `peer-${name}`;
  const queue = new Queue(name, { connection: client(), prefix });
  const children = await startWorkers(workers, { queue: name, prefix, concurrency, recordLag: true });
  // Every second; aligned: all on the same millisecond; spread: offsets over the second.
  for (let i = 0; i < triggers; i++) {
    const offset = phase === 'aligned' ? 0 : Math.floor((i * 1000) / triggers);
    await queue.upsertJobScheduler(`t${i}`, { every: 1000, offset }, { name: `t${i}`, data: {}, opts: { removeOnComplete: true } });
  }
  console.error(`  … ${triggers} schedulers firing for ${duration} s`);
  // Measure whole seconds after the schedulers settled.
  await sleep(2000 - (Date.now() % 1000));
  const windowStart = Date.now();
  const before = cpuReading(children.map((child) => child.pid));
  await sleep(duration * 1000);
  const windowEnd = Date.now();
  const after = cpuReading(children.map((child) => child.pid));
  console.error('  … removing the schedulers');
  for (let i = 0; i < triggers; i++) await queue.removeJobScheduler(`t${i}`);
  await sleep(1500);
  console.error('  … stopping the workers');
  const lagsPerWorker = await stopWorkers(children);
  console.error('  … removing the queue');
  await queue.obliterate({ force: true });
  await queue.close();
  const inWindow = lagsPerWorker.flat().filter(({ key }) => {
    const due = Number(key.split('@').pop());
    return due >= windowStart && due < windowEnd;
  });
  const distinct = new Set(inWindow.map(({ key }) => key)).size;
  const expected = triggers * duration;
  return {
    peer: 'bullmq', triggers, phase, workers, concurrency, expected,
    fires: inWindow.length,
    duplicates: inWindow.length - distinct,
    missed: Math.max(0, expected - distinct),
    lag_ms: percentiles(inWindow.map(({ lag }) => lag)),
    cpu_ms_per_fire: cpuPerUnit(before, after, expected),
    loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
  };
}

// ---------------------------------------------------------------------------------------

function options(args) {
  const found = { jobs: 20000, workers: 2, concurrency: 10, sizes: [2000, 20000, 200000], triggers: 1000, phase: 'spread', duration: 10 };
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    const key = flag.replace(/^--/, '');
    if (key === 'sizes') found.sizes = value.split(',').map(Number);
    else if (key === 'phase') found.phase = value;
    else if (key in found) found[key] = Number(value);
    else throw new Error(`unknown option ${flag}`);
  }
  return found;
}

const [scenario, ...rest] = process.argv.slice(2);
if (scenario === 'worker') {
  await workerMain();
} else {
  const run = { drain, backlog, 'fire-storm': fireStorm }[scenario];
  if (!run) {
    console.error('usage: node bench.mjs drain|backlog|fire-storm [--jobs N] [--workers W] [--concurrency C] [--sizes A,B] [--triggers T] [--phase spread|aligned] [--duration S]');
    process.exit(2);
  }
  console.log(JSON.stringify({ scenario, figures: await run(options(rest)) }));
  process.exit(0);
}
