// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// LaunchDarkly's Node server SDK on the workloads of ldasync-bench's eval
// group (bench/ldasync-bench.c), on the same data:
//
//   ldasync-bench --dump-eval-data > eval-data.json
//   node eval-bench.mjs [--json] [--runs N] [--ops N] eval-data.json [NAME ...]
//
// Each workload: a warm-up run, then N runs (7), reported as the median (and
// the smallest and largest run). --ops N replaces the 1,000,000 evaluations
// of the sequential workloads (the all-flags one keeps its 20). NAME selects
// workloads as ldasync-bench does ("eval.rich"); with none, all run.
// See README.md for what is on the clock.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basicLogger, init, integrations } from '@launchdarkly/node-server-sdk';

const FLAGS = 10000;

function usage() {
  console.error('usage: node eval-bench.mjs [--json] [--runs N] [--ops N] EVAL-DATA.json [NAME ...]\n' +
                '  EVAL-DATA.json: the output of `ldasync-bench --dump-eval-data`');
  process.exit(2);
}

let jsonOut = false;
let runs = 7;
let seqOps = 1000000;
const args = process.argv.slice(2);
while (args.length && args[0].startsWith('-')) {
  const a = args.shift();
  if (a === '--json') jsonOut = true;
  else if (a === '--runs' && args.length) runs = Math.max(1, parseInt(args.shift(), 10) || 1);
  else if (a === '--ops' && args.length) seqOps = Math.max(1, parseInt(args.shift(), 10) || 1);
  else usage();
}
if (!args.length) usage();
const dataPath = args.shift();
const names = args;

// ldasync's data is {"features": ..., "segments": ...}, as a data source
// delivers it; LaunchDarkly's file data source reads {"flags": ...,
// "segments": ...}. The flags and segments themselves are passed unchanged.
const dumped = JSON.parse(readFileSync(dataPath, 'utf8'));
if (!dumped.features || !dumped.segments) {
  console.error(`${dataPath}: not the output of ldasync-bench --dump-eval-data`);
  process.exit(1);
}
const dir = mkdtempSync(join(tmpdir(), 'ld-eval-bench-'));
const ldPath = join(dir, 'flags.json');
writeFileSync(ldPath, JSON.stringify({ flags: dumped.features, segments: dumped.segments }));

// The same context as eval_context(): a user that matches no rule of "rich".
function evalContext(key) {
  return { kind: 'user', key, email: 'someone@example.org', country: 'us', age: 30,
           version: '1.4.2', beta: false };
}

const client = init('sdk-key-not-used', {
  updateProcessor: new integrations.FileDataSourceFactory({ paths: [ldPath] }).getFactory(),
  sendEvents: false, // no event processor (NullEventProcessor): evaluation only
  diagnosticOptOut: true,
  logger: basicLogger({ level: 'warn' }),
});
await client.waitForInitialization({ timeout: 60 });
rmSync(dir, { recursive: true, force: true });

function fail(msg) {
  console.error(msg);
  client.close();
  process.exit(1);
}

// Evaluations of `flag` for the context of `ctxKey`, awaited one after the
// other; each served value is checked against `expect` (as eval_sequential).
async function evalSequential(ops, flag, ctxKey, expect) {
  const ctx = evalContext(ctxKey);
  let wrong = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) {
    const d = await client.variationDetail(flag, ctx, null);
    if (d.value !== expect) wrong++;
  }
  const ns = Number(process.hrtime.bigint() - t0) / ops;
  if (wrong) fail(`${flag}: ${wrong} of ${ops} evaluations served another value`);
  return ns;
}

// The all-flags state for "user-1" and its JSON object (toJSON, the
// counterpart of the json_t that ld_evaluator_all_flags serves).
async function evalAllFlags(ops) {
  const ctx = evalContext('user-1');
  let bad = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) {
    const state = await client.allFlagsState(ctx);
    const json = state.toJSON();
    if (Object.keys(json).length !== FLAGS + 4) bad++;
  }
  const ns = Number(process.hrtime.bigint() - t0) / ops;
  if (bad) fail(`eval.all_flags: ${bad} of ${ops} states of a wrong size`);
  return ns;
}

const workloads = [
  { name: 'eval.bool', ops: seqOps, fn: (n) => evalSequential(n, 'flag-000042', 'user-1', true) },
  { name: 'eval.rich', ops: seqOps, fn: (n) => evalSequential(n, 'rich', 'user-1', 'c') },
  { name: 'eval.segment', ops: seqOps, fn: (n) => evalSequential(n, 'seg', 'member-500', true) },
  { name: 'eval.all_flags', ops: 20, fn: evalAllFlags },
];

function selected(name) {
  return !names.length || names.some((n) => name === n || name.startsWith(`${n}.`));
}
if (!workloads.some((w) => selected(w.name))) {
  console.error(`no such workload: ${names.join(' ')} (there are ${workloads.map((w) => w.name).join(', ')})`);
  client.close();
  process.exit(2);
}

// What the SDK serves, once, before any clock: the values the ldasync bench
// expects, and the reasons (printed, so a reader sees the same path was taken).
async function check() {
  const cases = [['flag-000042', 'user-1', true, 'FALLTHROUGH'], ['rich', 'user-1', 'c', 'FALLTHROUGH'],
                 ['seg', 'member-500', true, 'RULE_MATCH'], ['seg', 'user-1', false, 'FALLTHROUGH']];
  for (const [flag, key, value, kind] of cases) {
    const d = await client.variationDetail(flag, evalContext(key), null);
    const line = `check: ${flag} for ${key}: ${JSON.stringify(d.value)} ${JSON.stringify(d.reason)} ` +
                 `(variation ${d.variationIndex})`;
    if (d.value !== value || d.reason.kind !== kind) fail(`${line}; expected ${JSON.stringify(value)} ${kind}`);
    if (!jsonOut) console.log(line);
  }
  const all = (await client.allFlagsState(evalContext('user-1'))).toJSON();
  let trues = 0;
  for (let i = 0; i < FLAGS; i++) trues += all[`flag-${String(i).padStart(6, '0')}`] === true;
  if (trues !== FLAGS || all.rich !== 'c' || all.seg !== false || all.$valid !== true) {
    fail(`check: allFlagsState: ${trues} flags true, rich ${all.rich}, seg ${all.seg}, valid ${all.$valid}`);
  }
  if (!jsonOut) console.log(`check: allFlagsState for user-1: ${Object.keys(all).length} keys, every flag-* true, rich "c", seg false`);
}

await check();
if (!jsonOut) {
  const sdk = JSON.parse(readFileSync(new URL('./node_modules/@launchdarkly/node-server-sdk/package.json',
                                             import.meta.url), 'utf8'));
  console.log(`node ${process.version}, @launchdarkly/node-server-sdk ${sdk.version}, ${runs} runs`);
  console.log(`${'workload'.padEnd(20)} ${'ops'.padStart(8)} ${'ns/op'.padStart(12)} ` +
              `${'min'.padStart(12)} ${'max'.padStart(12)} ${'peak_kb'.padStart(10)} ${'cpu%'.padStart(5)}`);
}
for (const w of workloads) {
  if (!selected(w.name)) continue;
  await w.fn(w.ops); // warm-up
  const v = [];
  // cpu%: the process's CPU time (every thread, GC helpers too) over the
  // wall time of the timed runs; well under 100 means the machine took the
  // CPU away and the wall figures are inflated.
  const c0 = process.cpuUsage();
  const w0 = process.hrtime.bigint();
  for (let r = 0; r < runs; r++) v.push(await w.fn(w.ops));
  const c1 = process.cpuUsage(c0);
  const cpuPct = ((c1.user + c1.system) * 1e5) / Number(process.hrtime.bigint() - w0);
  v.sort((a, b) => a - b);
  const median = v[Math.floor(runs / 2)];
  const peakKb = process.resourceUsage().maxRSS;
  if (jsonOut) {
    console.log(JSON.stringify({ name: w.name, ops: w.ops, ns_per_op: median, min: v[0], max: v[runs - 1],
                                 runs: v, peak_kb: peakKb, cpu_pct: cpuPct }));
  } else {
    const f = (x) => x.toFixed(1).padStart(12);
    let line = `${w.name.padEnd(20)} ${String(w.ops).padStart(8)} ${f(median)} ${f(v[0])} ${f(v[runs - 1])} ` +
               `${String(peakKb).padStart(10)} ${cpuPct.toFixed(0).padStart(5)}`;
    if (w.name === 'eval.all_flags') line += `   (${(median / 1e6).toFixed(2)} ms)`;
    console.log(line);
  }
}
client.close();
