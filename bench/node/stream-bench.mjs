// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// LaunchDarkly's Node server SDK on the stream group of ldasync-bench
// (bench/ldasync-bench.c), on the same data and the same kind of upstream:
//
//   ldasync-bench --dump-eval-data > eval-data.json
//   node stream-bench.mjs [--runs N] [--ops N] eval-data.json
//
// A fake LaunchDarkly stream in the same process (node:http: GET /all, a put
// of the 10,000 flags, then one patch at a time) and the SDK streaming from
// it:
//   stream.put_ready_ms  the client made until waitForInitialization()
//                        resolves (connection, the put, its parse, the store);
//   stream.patch_us      a patch written by the server until the SDK's
//                        "update:KEY" event and a variationDetail() of that
//                        flag answered: the median (and the 99th percentile,
//                        stream.patch_p99_us) of --ops patches (1000);
//   stream.rss_kb        the process's resident memory once initialized and
//                        quiet for a second (the data held twice here: the
//                        server's put text and the SDK's store).
// Each figure is the median of N runs (3).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { basicLogger, init } from '@launchdarkly/node-server-sdk';

let runs = 3;
let ops = 1000;
const args = process.argv.slice(2);
while (args.length && args[0].startsWith('-')) {
  const a = args.shift();
  if (a === '--runs' && args.length) runs = Math.max(1, parseInt(args.shift(), 10) || 1);
  else if (a === '--ops' && args.length) ops = Math.max(1, parseInt(args.shift(), 10) || 1);
  else { console.error('usage: node stream-bench.mjs [--runs N] [--ops N] EVAL-DATA.json'); process.exit(2); }
}
const dumped = JSON.parse(readFileSync(args[0], 'utf8'));
const flags = dumped.features;
const keys = Object.keys(flags);
const putText = `event: put\ndata: ${JSON.stringify({ path: '/', data: { flags, segments: dumped.segments } })}\n\n`;
const patches = [];
for (let i = 0; i < ops; i++) {
  const key = keys[i % keys.length];
  const data = { ...flags[key], version: 1000000 + i };
  patches.push({ key, text: `event: patch\ndata: ${JSON.stringify({ path: `/flags/${key}`, data })}\n\n` });
}

function upstream() {
  let live = null;
  const server = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write(putText);
    live = res;
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    port: server.address().port,
    send: (text) => live.write(text),
    close: () => { if (live) live.end(); server.closeAllConnections(); server.close(); },
  })));
}

function client(port) {
  return init('sdk-bench', {
    streamUri: `http://127.0.0.1:${port}`,
    baseUri: `http://127.0.0.1:${port}`,
    sendEvents: false,
    diagnosticOptOut: true,
    logger: basicLogger({ level: 'error' }),
  });
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const results = { 'stream.put_ready_ms': [], 'stream.patch_us': [], 'stream.patch_p99_us': [], 'stream.rss_kb': [] };

for (let r = 0; r < runs; r++) {
  const up = await upstream();
  const t0 = process.hrtime.bigint();
  const c = client(up.port);
  await c.waitForInitialization({ timeout: 60 });
  results['stream.put_ready_ms'].push(Number(process.hrtime.bigint() - t0) / 1e6);
  await new Promise((res) => setTimeout(res, 1000));
  if (global.gc) global.gc();
  results['stream.rss_kb'].push(process.memoryUsage().rss / 1024);
  const ctx = { kind: 'user', key: 'u-1' };
  const lat = [];
  for (let i = 0; i < ops; i++) {
    const { key, text } = patches[i];
    const seen = new Promise((res) => c.once(`update:${key}`, res));
    const sent = process.hrtime.bigint();
    up.send(text);
    await seen;
    await c.variationDetail(key, ctx, null);
    lat.push(Number(process.hrtime.bigint() - sent) / 1e3);
  }
  lat.sort((x, y) => x - y);
  results['stream.patch_us'].push(lat[Math.floor(ops / 2)]);
  results['stream.patch_p99_us'].push(lat[Math.floor(ops * 0.99)]);
  c.close();
  up.close();
}
for (const [name, v] of Object.entries(results))
  console.log(`${name.padEnd(38)} ${String(name.includes('patch') ? ops : 1).padStart(10)} ${median(v).toFixed(2).padStart(10)}`);
process.exit(0);
