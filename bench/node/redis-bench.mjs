// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// LaunchDarkly's Node server SDK's Redis store (@launchdarkly/node-server-sdk-redis,
// its RedisFeatureStore, cacheTTL 0: every read goes to Redis) on the redis
// workloads of ldasync-bench (bench/ldasync-bench.c), on the same data:
//
//   ldasync-bench --dump-eval-data > eval-data.json
//   LDASYNC_BENCH_REDIS=/path/to/redis.sock node redis-bench.mjs [--runs N] eval-data.json
//
// It connects to the Redis at the unix socket $LDASYNC_BENCH_REDIS
// (redisOpts: { path }), as bench/redis-bench.sh sets it, or else starts a
// redis-server of its own ($REDIS_SERVER or PATH) on a unix socket in a
// temporary directory, killed at the end; without one it says so and exits 0.
//
//   redis.init_10k.ms         store.init() of the data (10,002 flags and a
//                             segment, parsed before the clock), until its
//                             callback: ms per init
//   redis.init_10k.pass_ms    the longest stall of the event loop meanwhile:
//                             the greatest lateness of a 1 ms interval timer
//   redis.get                 store.get() of a flag, awaited (a promise on its
//                             callback, as the SDK's AsyncStoreFacade does),
//                             the item's key compared; the next one after it:
//                             ns per get
//   redis.get.p50_us, .p99_us the same gets, each timed (us)
//   redis.get.inflight64      64 gets in flight at all times (64 async loops
//                             of the above): ns per get
//   redis.all_10k.ms          store.all() of the features, awaited, its keys
//                             counted and checked: ms per all
//   redis.all_10k.pass_ms     the longest stall of the event loop meanwhile
//   redis.get.cached          the gets of redis.get through the store's cache
//                             (cacheTTL 30 s), filled by the init through it
//   redis.eval.daemon         variationDetail() of flag-000042 by the SDK in
//                             daemon mode (useLdd) on that cached store, for
//                             ldasync-bench's context (user-1 with five
//                             attributes), events off, awaited, value checked:
//                             ns per evaluation
// The i-th get of a run reads flag-NNNNNN, N = i * 7919 mod 10,000, as
// ldasync-bench does. Each run makes a store and awaits initialized() (its
// first answer) before the clock; the get and all runs init the data before
// the clock too. Each figure is the median of N runs (3) after a warm-up run.
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { basicLogger, init as ldInit } from '@launchdarkly/node-server-sdk';
import { RedisFeatureStore } from '@launchdarkly/node-server-sdk-redis';

let runs = 3;
const args = process.argv.slice(2);
while (args.length && args[0].startsWith('-')) {
  const a = args.shift();
  if (a === '--runs' && args.length) runs = Math.max(1, parseInt(args.shift(), 10) || 1);
  else { console.error('usage: node redis-bench.mjs [--runs N] EVAL-DATA.json [NAME ...]'); process.exit(2); }
}
const dumped = JSON.parse(readFileSync(args.shift(), 'utf8'));
const only = args;
const data = { features: dumped.features, segments: dumped.segments };
const nfeatures = Object.keys(data.features).length;
const features = { namespace: 'features' };

// ---- the Redis server ----------------------------------------------------

function findRedis() {
  const env = process.env.REDIS_SERVER;
  const candidates = env ? [env] : (process.env.PATH || '').split(delimiter).map((d) => join(d, 'redis-server'));
  for (const c of candidates) {
    try { accessSync(c, constants.X_OK); return c; } catch { /* next */ }
  }
  return null;
}

let server = null;
let serverDir = null;
let sock = process.env.LDASYNC_BENCH_REDIS;
if (!sock) {
  const prog = findRedis();
  if (!prog) {
    console.log('redis: skipped: no redis-server (set REDIS_SERVER or LDASYNC_BENCH_REDIS)');
    process.exit(0);
  }
  serverDir = mkdtempSync(join(tmpdir(), 'ld-redis-bench-'));
  sock = join(serverDir, 'redis.sock');
  server = spawn(prog, ['--port', '0', '--unixsocket', sock, '--unixsocketperm', '700', '--save', '',
                        '--appendonly', 'no', '--dir', serverDir], { stdio: 'ignore' });
  for (let i = 0; i < 1000; i++) {
    const up = await new Promise((r) => {
      const c = connect(sock, () => { c.end(); r(true); });
      c.on('error', () => r(false));
    });
    if (up) break;
    await new Promise((r) => setTimeout(r, 10));
  }
}

const logger = basicLogger({ level: 'error' });

// A store (cacheTTL 0: uncached), connected: its first answer came.
async function newStore(cacheTTL = 0) {
  const store = RedisFeatureStore({ redisOpts: { path: sock }, cacheTTL })(
    { basicConfiguration: { logger } });
  await new Promise((r) => store.initialized(r));
  return store;
}

const init = (store) => new Promise((r) => store.init(data, r));
const get = (store, key) => new Promise((r) => store.get(features, key, r));
const all = (store) => new Promise((r) => store.all(features, r));
const flagKey = (i) => `flag-${String((i * 7919) % 10000).padStart(6, '0')}`;

// The longest lateness of a 1 ms interval timer while it runs (ms).
function probe() {
  let last = performance.now();
  let worst = 0;
  const t = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 1);
    last = now;
  }, 1);
  return () => { clearInterval(t); return Math.max(worst, performance.now() - last - 1); };
}

// ---- workloads -----------------------------------------------------------

async function initRun(ops, pass) {
  const store = await newStore();
  let total = 0;
  let worst = 0;
  for (let i = 0; i < ops; i++) {
    const stop = probe();
    const t0 = process.hrtime.bigint();
    await init(store);
    total += Number(process.hrtime.bigint() - t0);
    worst = Math.max(worst, stop());
  }
  store.close();
  return pass ? worst : total / ops / 1e6;
}

// `what`: 0 ns per get, 1 the median (us), 2 the 99th percentile (us).
async function getRun(ops, inflight, what, cacheTTL = 0) {
  const store = await newStore(cacheTTL);
  await init(store);
  const lat = what ? new Float64Array(ops) : null;
  let issued = 0;
  let done = 0;
  let wrong = 0;
  async function loop() {
    while (issued < ops) {
      const key = flagKey(issued++);
      const t0 = lat ? process.hrtime.bigint() : 0n;
      const item = await get(store, key);
      if (lat) lat[done] = Number(process.hrtime.bigint() - t0);
      if (!item || item.key !== key) wrong++;
      done++;
    }
  }
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: inflight }, loop));
  const ns = Number(process.hrtime.bigint() - t0) / ops;
  store.close();
  if (wrong) { console.error(`redis.get: ${wrong} of ${ops} gets served another item`); process.exit(1); }
  if (!what) return ns;
  lat.sort();
  return lat[what === 1 ? Math.floor(ops / 2) : Math.floor((ops * 99) / 100)] / 1e3;
}

async function allRun(ops, pass) {
  const store = await newStore();
  await init(store);
  let total = 0;
  let worst = 0;
  for (let i = 0; i < ops; i++) {
    const stop = probe();
    const t0 = process.hrtime.bigint();
    const items = await all(store);
    const n = Object.keys(items).length;
    total += Number(process.hrtime.bigint() - t0);
    worst = Math.max(worst, stop());
    if (n !== nfeatures) { console.error(`redis.all: ${n} flags, not ${nfeatures}`); process.exit(1); }
  }
  store.close();
  return pass ? worst : total / ops / 1e6;
}

async function daemonRun(ops) {
  const seed = await newStore();
  await init(seed);
  seed.close();
  const client = ldInit('sdk-bench', {
    useLdd: true,
    sendEvents: false,
    diagnosticOptOut: true,
    logger,
    featureStore: RedisFeatureStore({ redisOpts: { path: sock }, cacheTTL: 30 }),
  });
  await client.waitForInitialization({ timeout: 10 });
  const context = { kind: 'user', key: 'user-1', email: 'someone@example.org', country: 'us',
                    age: 30, version: '1.4.2', beta: false };
  await client.variationDetail('flag-000042', context, false); // the cache filled
  let wrong = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) {
    const d = await client.variationDetail('flag-000042', context, false);
    if (d.value !== true) wrong++;
  }
  const ns = Number(process.hrtime.bigint() - t0) / ops;
  client.close();
  if (wrong) { console.error(`redis.eval.daemon: ${wrong} of ${ops} served another value`); process.exit(1); }
  return ns;
}

const rows = [
  ['redis.init_10k.ms', 5, () => initRun(5, false)],
  ['redis.init_10k.pass_ms', 5, () => initRun(5, true)],
  ['redis.get', 20000, () => getRun(20000, 1, 0)],
  ['redis.get.p50_us', 20000, () => getRun(20000, 1, 1)],
  ['redis.get.p99_us', 20000, () => getRun(20000, 1, 2)],
  ['redis.get.inflight64', 200000, () => getRun(200000, 64, 0)],
  ['redis.all_10k.ms', 5, () => allRun(5, false)],
  ['redis.all_10k.pass_ms', 5, () => allRun(5, true)],
  ['redis.get.cached', 200000, () => getRun(200000, 1, 0, 30)],
  ['redis.eval.daemon', 200000, () => daemonRun(200000)],
];

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const version = (p) => JSON.parse(readFileSync(new URL(`./node_modules/${p}/package.json`, import.meta.url), 'utf8')).version;
console.log(`node ${process.version}, @launchdarkly/node-server-sdk ${version('@launchdarkly/node-server-sdk')}, ` +
            `@launchdarkly/node-server-sdk-redis ${version('@launchdarkly/node-server-sdk-redis')}, ` +
            `ioredis ${version('ioredis')}, ${runs} runs, Redis at ${sock}`);
for (const [name, ops, fn] of rows) {
  if (only.length && !only.some((o) => name === o || name.startsWith(`${o}.`))) continue;
  await fn(); // warm-up
  const v = [];
  for (let r = 0; r < runs; r++) v.push(await fn());
  console.log(`${name.padEnd(38)} ${String(ops).padStart(10)} ${median(v).toFixed(2).padStart(10)}`);
}
if (server) {
  server.kill('SIGKILL');
  rmSync(serverDir, { recursive: true, force: true });
}
