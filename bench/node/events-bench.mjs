// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// LaunchDarkly's Node server SDK on the client.eval workloads of
// ldasync-bench (bench/ldasync-bench.c), on the same data, with analytics
// events off and on, sent to a local events service (node:http in the same
// process, answering 202):
//
//   ldasync-bench --dump-eval-data > eval-data.json
//   node events-bench.mjs [--runs N] [--ops N] eval-data.json
//
//   client.eval.bool              variationDetail of "flag-000042" for
//                                 "user-1", awaited one after the other;
//                                 events off (sendEvents: false)
//   client.eval.bool.events       events on: the flag tracks nothing (the
//                                 summary counts it)
//   client.eval.tracked.events    events on, the flag "tracked" has
//                                 trackEvents: a feature event each, all
//                                 kept (capacity: ops + 16, no flush meanwhile)
//   client.eval.tracked.flush_ms  then flush() of them all, in ms, until the
//                                 events service answered
// Each figure is the median of N runs (3) after a warm-up run; ops 1,000,000
// (200,000 for the tracked flag) unless --ops.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basicLogger, init, integrations } from '@launchdarkly/node-server-sdk';

let runs = 3;
let ops = 0;
const args = process.argv.slice(2);
while (args.length && args[0].startsWith('-')) {
  const a = args.shift();
  if (a === '--runs' && args.length) runs = Math.max(1, parseInt(args.shift(), 10) || 1);
  else if (a === '--ops' && args.length) ops = Math.max(1, parseInt(args.shift(), 10) || 1);
  else { console.error('usage: node events-bench.mjs [--runs N] [--ops N] EVAL-DATA.json'); process.exit(2); }
}
const dumped = JSON.parse(readFileSync(args[0], 'utf8'));
// The flag the C bench adds for its tracked workload.
const flags = { ...dumped.features, tracked: { key: 'tracked', version: 1, on: true, trackEvents: true,
  variations: [true, false], fallthrough: { variation: 0 }, salt: 's' } };
const dir = mkdtempSync(join(tmpdir(), 'ld-events-bench-'));
const ldPath = join(dir, 'flags.json');
writeFileSync(ldPath, JSON.stringify({ flags, segments: dumped.segments }));

let posts = 0;
const sink = createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => { if (req.url.endsWith('/bulk')) posts++; res.writeHead(202); res.end(); });
});
await new Promise((r) => sink.listen(0, '127.0.0.1', r));
const eventsUri = `http://127.0.0.1:${sink.address().port}`;

async function client(events, capacity) {
  const c = init('sdk-bench', {
    updateProcessor: new integrations.FileDataSourceFactory({ paths: [ldPath] }).getFactory(),
    sendEvents: events,
    eventsUri,
    capacity,
    flushInterval: 3600,
    diagnosticOptOut: true,
    logger: basicLogger({ level: 'error' }),
  });
  await c.waitForInitialization({ timeout: 60 });
  return c;
}

const ctx = { kind: 'user', key: 'user-1', email: 'someone@example.org', country: 'us', age: 30,
              version: '1.4.2', beta: false };

// One run: ns per evaluation, and (tracked) the flush's ms.
async function run(events, flag, n) {
  const c = await client(events, flag === 'tracked' ? n + 16 : 10000);
  let wrong = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const d = await c.variationDetail(flag, ctx, false);
    if (d.value !== true) wrong++;
  }
  const ns = Number(process.hrtime.bigint() - t0) / n;
  let flushMs = 0;
  if (flag === 'tracked') {
    const before = posts;
    const t1 = process.hrtime.bigint();
    await c.flush();
    flushMs = Number(process.hrtime.bigint() - t1) / 1e6;
    if (posts === before) { console.error('tracked: no payload reached the events service'); process.exit(1); }
  }
  c.close();
  if (wrong) { console.error(`${flag}: ${wrong} of ${n} served another value`); process.exit(1); }
  return { ns, flushMs };
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const sdk = JSON.parse(readFileSync(new URL('./node_modules/@launchdarkly/node-server-sdk/package.json',
                                           import.meta.url), 'utf8'));
console.log(`node ${process.version}, @launchdarkly/node-server-sdk ${sdk.version}, ${runs} runs`);
const rows = [
  ['client.eval.bool', false, 'flag-000042', ops || 1000000],
  ['client.eval.bool.events', true, 'flag-000042', ops || 1000000],
  ['client.eval.tracked.events', true, 'tracked', ops || 200000],
];
for (const [name, events, flag, n] of rows) {
  await run(events, flag, Math.min(n, 20000)); // warm-up
  const ns = [];
  const flush = [];
  for (let r = 0; r < runs; r++) {
    const x = await run(events, flag, n);
    ns.push(x.ns);
    flush.push(x.flushMs);
  }
  console.log(`${name.padEnd(30)} ${String(n).padStart(8)} ${median(ns).toFixed(1).padStart(12)}`);
  if (flag === 'tracked') {
    console.log(`${'client.eval.tracked.flush_ms'.padEnd(30)} ${String(n).padStart(8)} ` +
                `${median(flush).toFixed(1).padStart(12)}`);
  }
}
sink.close();
rmSync(dir, { recursive: true, force: true });
