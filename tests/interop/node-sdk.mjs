// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// LaunchDarkly's Node server SDK as a client of ldasync-serve.
//
//   node node-sdk.mjs BASE_URL SDK_KEY DATA_FILE
//
// Two clients of the same SDK evaluate the same contexts: one reads
// DATA_FILE itself through the SDK's own file data source (the reference),
// the other gets the data from ldasync-serve at BASE_URL, once by polling
// and once by streaming. Their all-flags states must be equal. Then the
// streaming client must see a change: the script rewrites DATA_FILE (a new
// value for the first key of "flagValues") and waits for the SDK's update
// event and the new value. Prints one line per check; exits 1 on the first
// failure.
import { readFileSync, writeFileSync } from 'node:fs';
import { basicLogger, init, integrations } from '@launchdarkly/node-server-sdk';

const [baseUrl, sdkKey, dataFile, eventsFile] = process.argv.slice(2);
if (!dataFile) {
  console.error('usage: node node-sdk.mjs BASE_URL SDK_KEY DATA_FILE [EVENTS_FILE]');
  process.exit(2);
}
const logger = basicLogger({ level: 'warn' });
const contexts = [
  { kind: 'user', key: 'alice', email: 'alice@example.com', country: 'fr' },
  { kind: 'user', key: 'bob', name: 'Bob', beta: true },
  { kind: 'multi', user: { key: 'carol' }, organization: { key: 'acme', plan: 'enterprise' } },
];

function fail(what) {
  console.error(`FAIL: ${what}`);
  process.exit(1);
}

// JSON text with the keys of every object sorted: states are compared as
// values (the order of keys in an all-flags state is not significant).
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

async function states(client) {
  const out = [];
  for (const c of contexts) {
    out.push((await client.allFlagsState(c, { withReasons: true })).toJSON());
  }
  return out;
}

async function started(client, what) {
  try {
    await client.waitForInitialization({ timeout: 10 });
  } catch (e) {
    fail(`${what}: not initialized: ${e}`);
  }
}

const reference = init('unused', {
  updateProcessor: new integrations.FileDataSourceFactory({ paths: [dataFile] }).getFactory(),
  sendEvents: false,
  logger,
});
await started(reference, 'file data source');
const want = await states(reference);

// ldasync's own evaluator, through the evalx endpoint, against the SDK's
// client-side all-flags state: each flag's entry in LaunchDarkly's evalx
// format is the state's value and $flagsState entry.
for (const c of contexts) {
  const state = (await reference.allFlagsState(c, { withReasons: true, clientSideOnly: true })).toJSON();
  const expected = {};
  for (const [key, meta] of Object.entries(state.$flagsState)) {
    expected[key] = { value: state[key], ...meta };
  }
  const b64 = Buffer.from(JSON.stringify(c)).toString('base64url');
  const res = await fetch(`${baseUrl}/sdk/evalx/interop-env/contexts/${b64}?withReasons=true`);
  if (res.status !== 200) fail(`evalx: status ${res.status} for ${JSON.stringify(c)}`);
  const got = await res.json();
  if (canonical(got) !== canonical(expected)) {
    console.error(JSON.stringify({ context: c, want: expected, got }, null, 1));
    fail('evalx: ldasync\'s evaluations differ from the SDK\'s');
  }
}
console.log(`ok: evalx: ldasync's evaluator equals the SDK's for ${contexts.length} contexts`);
reference.close();
const nflags = Object.keys(want[0]).filter((k) => !k.startsWith('$')).length;
if (nflags === 0) fail('the data file has no flags');

for (const stream of [false, true]) {
  const mode = stream ? 'streaming' : 'polling';
  const client = init(sdkKey, {
    baseUri: baseUrl,
    streamUri: baseUrl,
    eventsUri: baseUrl,
    stream,
    sendEvents: false,
    logger,
  });
  await started(client, mode);
  const got = await states(client);
  if (canonical(got) !== canonical(want)) {
    console.error(JSON.stringify({ want, got }, null, 1));
    fail(`${mode}: the all-flags states differ from the file data source's`);
  }
  console.log(`ok: ${mode}: ${nflags} flags, ${contexts.length} contexts, states equal`);
  if (!stream) {
    client.close();
    continue;
  }
  const data = JSON.parse(readFileSync(dataFile, 'utf8'));
  const key = Object.keys(data.flagValues || {})[0];
  if (!key) fail('the data file has no flagValues');
  const value = `changed-${Date.now()}`;
  const updated = new Promise((resolve) => client.on(`update:${key}`, resolve));
  data.flagValues[key] = value;
  const t0 = Date.now();
  writeFileSync(dataFile, JSON.stringify(data, null, 2));
  const timer = setTimeout(() => fail(`streaming: no update of ${key} within 5 s`), 5000);
  await updated;
  clearTimeout(timer);
  const seen = await client.variation(key, contexts[0], null);
  if (seen !== value) fail(`streaming: ${key} is ${JSON.stringify(seen)}, not ${value}`);
  console.log(`ok: streaming: the change of ${key} arrived in ${Date.now() - t0} ms`);
  client.close();
}

// Through a relay: the SDK's events, posted to the relay, reach the events
// service it forwards to (eventsFile: what that service received).
if (eventsFile) {
  const client = init(sdkKey, {
    baseUri: baseUrl,
    streamUri: baseUrl,
    eventsUri: baseUrl,
    diagnosticOptOut: true,
    logger,
  });
  await started(client, 'events');
  const who = { kind: 'user', key: 'interop-events' };
  client.identify(who);
  client.track('interop-metric', who, { n: 1 }, 42);
  await client.flush();
  const t0 = Date.now();
  let found = null;
  while (!found && Date.now() - t0 < 5000) {
    for (const line of readFileSync(eventsFile, 'utf8').split('\n').filter(Boolean)) {
      const post = JSON.parse(line);
      if (post.path === '/bulk' && post.body.includes('interop-metric')) found = post;
    }
    if (!found) await new Promise((r) => setTimeout(r, 50));
  }
  if (!found) fail('events: the SDK\'s events did not reach the events service through the relay');
  const events = JSON.parse(found.body);
  const custom = events.find((e) => e.kind === 'custom');
  if (found.authorization !== sdkKey || found.schema !== '4' || !custom ||
      custom.metricValue !== 42 || !events.some((e) => e.kind === 'identify')) {
    fail(`events: not as the SDK sent them: ${JSON.stringify(found)}`);
  }
  console.log(`ok: events: ${events.length} events went through the relay in ${Date.now() - t0} ms`);
  client.close();
}
process.exit(0);
