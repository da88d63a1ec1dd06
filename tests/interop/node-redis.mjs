// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// ldasync's Redis store (through redis-tool) against LaunchDarkly's Node SDK
// Redis store (@launchdarkly/node-server-sdk-redis) on the same redis-server.
//
//   node node-redis.mjs REDIS_TOOL SOCKET DATA_FILE WORK_DIR
//
// SOCKET: the unix socket of a redis-server of the test's own, empty;
// DATA_FILE: a flag file ({"flags", "flagValues", "segments"}, as
// data/flags.json); WORK_DIR: a directory for files of the test's own.
// The data set is DATA_FILE's as the SDK's file data source makes it (each
// of "flagValues" a flag at version 1), plus a flag with a key beyond ASCII
// and reals among its values, and a tombstone of each kind; the
// changes after it: an upsert of a flag (the first of "flags", its "on"
// turned over, one version up), an upsert of a segment (the first, with a
// context more in "included", one version up) and a delete of a flag (the
// first other of "flags" that another flag has as a prerequisite, one
// version up).
//
// A. Node writes (its store's init, upserts and delete; the default prefix,
//    "launchdarkly"), ldasync reads (redis-tool dump): the same items, item
//    by item (key, version, the whole JSON), no tombstone, initialized. Then
//    ldasync's writes must honour what Node wrote: an upsert of a deleted
//    flag at its tombstone's version (of Node's init, and of Node's delete,
//    which has no "key"), and a delete at the version of Node's upsert, are
//    not applied.
// B. ldasync writes (redis-tool init, upsert, delete; the prefix
//    "ld-interop-b"), Node reads: its store's all, get and initialized give
//    the same items, and the Node SDK in daemon mode (useLdd, the Redis
//    store without a cache, no connection to LaunchDarkly) evaluates every
//    flag for every context as the same SDK does reading the same data from
//    a flag file (its file data source): after the init, and again after
//    the changes (the reference then reads a file with the changed data).
// C. The raw layout, read with redis-cli: the keys that Node and ldasync
//    wrote in A and B have the same names (past the prefix) and types; and
//    the same init and delete written by each under a prefix of its own
//    leave the same keys, types, hash fields and values (values compared as
//    JSON; a tombstone by its version: Node's delete writes one without
//    "key", {"version":V,"deleted":true}, ldasync's with it).
//
// Prints one line per check; exits 1 on the first failure.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { basicLogger, init, integrations } from '@launchdarkly/node-server-sdk';
import { RedisFeatureStore } from '@launchdarkly/node-server-sdk-redis';

const [tool, socket, dataFile, work] = process.argv.slice(2);
if (!work) {
  console.error('usage: node node-redis.mjs REDIS_TOOL SOCKET DATA_FILE WORK_DIR');
  process.exit(2);
}
const url = `unix:${socket}`;
const logger = basicLogger({ level: 'warn' });
const FEATURES = { namespace: 'features' };
const SEGMENTS = { namespace: 'segments' };
const contexts = [
  { kind: 'user', key: 'user-alice', email: 'alice@example.com', country: 'fr' },
  { kind: 'user', key: 'user-dave', name: 'Dave' },
  { kind: 'user', key: 'bob', country: 'NZ', beta: true },
  { kind: 'multi', user: { key: 'carol', email: 'carol@example.com' }, org: { key: 'org-acme', plan: 'enterprise' } },
  { kind: 'org', key: 'org-initech' },
];

function fail(what, detail) {
  if (detail !== undefined) console.error(JSON.stringify(detail, null, 1));
  console.error(`FAIL: ${what}`);
  process.exit(1);
}

// JSON text with the keys of every object sorted: items and states are
// compared as values.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}
const clone = (v) => JSON.parse(JSON.stringify(v));

// An item as the Node SDK read it, without what its deserializer adds
// (attribute references, parsed from "attribute" and "bucketBy").
function plain(item) {
  return JSON.parse(JSON.stringify(item, (k, v) =>
    (k === 'attributeReference' || k === 'bucketByAttributeReference' ? undefined : v)));
}

// ---- the data ----

// DATA_FILE as the SDK's file data source reads it (FileDataSource: each of
// "flagValues" becomes a flag at version 1).
const file = JSON.parse(readFileSync(dataFile, 'utf8'));
const base = { features: clone(file.flags || {}), segments: clone(file.segments || {}) };
for (const [key, value] of Object.entries(file.flagValues || {})) {
  base.features[key] = { key, on: true, fallthrough: { variation: 0 }, variations: [value], version: 1 };
}
// and a flag of the test's own: a key beyond ASCII, reals among its values
const odd = 'interop-ключ-✓';
base.features[odd] = {
  key: odd, version: 2, on: true, salt: 'interop-salt', offVariation: 0, fallthrough: { variation: 1 },
  variations: [{ text: 'värde ✓ 🚩', ratio: 0.1 }, { tiny: 2.5e-7, max: 9007199254740991, neg: -1.5 }],
};
const flagKeys = Object.keys(file.flags || {});
const segmentKeys = Object.keys(base.segments);
if (!flagKeys.length || !segmentKeys.length) fail('the data file needs flags and segments');
const deadFlag = { key: 'interop-deleted-flag', version: 5, deleted: true };
const deadSegment = { key: 'interop-deleted-segment', version: 3, deleted: true };
const initial = clone(base);
initial.features[deadFlag.key] = deadFlag;
initial.segments[deadSegment.key] = deadSegment;

// the changes after the init
const upFlag = { ...clone(base.features[flagKeys[0]]) };
upFlag.version += 1;
upFlag.on = !upFlag.on;
const upSegment = clone(base.segments[segmentKeys[0]]);
upSegment.version += 1;
upSegment.included = [...(upSegment.included || []), 'bob'];
const prereqs = new Set(Object.values(base.features).flatMap((f) => (f.prerequisites || []).map((p) => p.key)));
const delKey = flagKeys.find((k) => prereqs.has(k) && k !== upFlag.key) ||
  flagKeys.find((k) => k !== upFlag.key);
const delVersion = base.features[delKey].version + 1;

// What a store holds, without tombstones, after the init (and the changes).
function expected(changed) {
  const want = clone(base);
  if (changed) {
    want.features[upFlag.key] = clone(upFlag);
    want.segments[upSegment.key] = clone(upSegment);
    delete want.features[delKey];
  }
  return want;
}

// ---- LaunchDarkly's Node Redis store, called as the SDK calls it ----

function nodeStore(prefix) {
  const options = { redisOpts: { path: socket }, cacheTTL: 0 };
  if (prefix) options.prefix = prefix;
  const store = RedisFeatureStore(options)({ basicConfiguration: { logger } });
  const call = (method, ...args) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Node store ${method}: no answer in 10 s`)), 10000);
    store[method](...args, (...res) => {
      clearTimeout(timer);
      resolve(res[0]);
    });
  });
  return {
    init: (data) => call('init', clone(data)),
    upsert: (kind, item) => call('upsert', kind, clone(item)),
    delete: (kind, key, version) => call('delete', kind, key, version),
    get: (kind, key) => call('get', kind, key),
    all: (kind) => call('all', kind),
    initialized: () => call('initialized'),
    close: () => store.close(),
  };
}

// ---- ldasync's Redis store, through redis-tool ----

function ld(prefix, ...args) {
  try {
    return execFileSync(tool, [url, prefix, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (e) {
    fail(`redis-tool ${args[0]} (prefix ${prefix}): exit ${e.status}: ${e.stderr}`);
  }
  return null;
}

function redis(...args) {
  return execFileSync('redis-cli', ['-s', socket, '--raw', ...args], { encoding: 'utf8' }).replace(/\n$/, '');
}

// Compares one kind's items, item by item. got: key -> item.
function compareItems(what, got, want) {
  const gk = Object.keys(got).sort();
  const wk = Object.keys(want).sort();
  if (canonical(gk) !== canonical(wk)) fail(`${what}: the keys differ`, { want: wk, got: gk });
  for (const k of wk) {
    const g = got[k];
    const w = want[k];
    if (g.key !== k) fail(`${what}: ${k}: "key" is ${JSON.stringify(g.key)}`);
    if (g.version !== w.version) fail(`${what}: ${k}: version ${g.version}, not ${w.version}`);
    if (canonical(g) !== canonical(w)) fail(`${what}: ${k}: the items differ`, { want: w, got: g });
  }
  return wk.length;
}

// ---- A: Node writes, ldasync reads ----

const PREFIX_A = 'launchdarkly'; // Node's default: its store is given none
{
  const node = nodeStore(undefined);
  await node.init(initial);
  await node.upsert(FEATURES, upFlag);
  await node.upsert(SEGMENTS, upSegment);
  await node.delete(FEATURES, delKey, delVersion);
  node.close();

  const dump = JSON.parse(ld(PREFIX_A, 'dump'));
  const want = expected(true);
  if (dump.initialized !== true) fail(`A: ldasync reads initialized ${dump.initialized} after Node's init`);
  const nf = compareItems('A: features Node wrote, as ldasync reads them', dump.features, want.features);
  const ns = compareItems('A: segments Node wrote, as ldasync reads them', dump.segments, want.segments);
  for (const [kind, key] of [['features', deadFlag.key], ['segments', deadSegment.key], ['features', delKey]]) {
    if (dump[kind][key]) fail(`A: ldasync lists ${kind} ${key}, which Node deleted`);
  }
  console.log(`ok: A: Node wrote, ldasync read ${nf} flags and ${ns} segments equal, no tombstone, initialized`);

  // Node's tombstones (its delete's has no "key") stop older writes of ldasync
  const stale = { ...clone(base.features[delKey]), version: delVersion };
  if (ld(PREFIX_A, 'upsert', 'features', JSON.stringify(stale)) !== 'false') {
    fail(`A: ldasync applied an upsert of ${delKey} at version ${delVersion} over Node's tombstone of that version`);
  }
  const staleDead = { ...clone(base.features[flagKeys[0]]), key: deadFlag.key, version: deadFlag.version };
  if (ld(PREFIX_A, 'upsert', 'features', JSON.stringify(staleDead)) !== 'false') {
    fail(`A: ldasync applied an upsert of ${deadFlag.key} at version ${deadFlag.version} over the tombstone of Node's init`);
  }
  if (ld(PREFIX_A, 'delete', 'features', upFlag.key, String(upFlag.version)) !== 'false') {
    fail(`A: ldasync applied a delete of ${upFlag.key} at the version of Node's upsert`);
  }
  const again = JSON.parse(ld(PREFIX_A, 'dump'));
  if (canonical(again) !== canonical(dump)) fail('A: ldasync\'s refused writes changed the data', { before: dump, after: again });
  console.log('ok: A: ldasync does not write over Node\'s tombstones and items of the same version');
}

// ---- B: ldasync writes, Node reads ----

const PREFIX_B = 'ld-interop-b';

async function states(client) {
  const out = [];
  for (const c of contexts) out.push((await client.allFlagsState(c, { withReasons: true })).toJSON());
  return out;
}

async function started(client, what) {
  try {
    await client.waitForInitialization({ timeout: 10 });
  } catch (e) {
    fail(`${what}: not initialized: ${e}`);
  }
}

let previous = null; // the reference states of the comparison before

// The states of the SDK reading `data` ({features, segments}) from a flag
// file through its file data source.
async function referenceStates(data, name) {
  const path = `${work}/${name}`;
  writeFileSync(path, JSON.stringify({ flags: data.features, segments: data.segments }, null, 1));
  const client = init('unused', {
    updateProcessor: new integrations.FileDataSourceFactory({ paths: [path] }).getFactory(),
    sendEvents: false,
    diagnosticOptOut: true,
    logger,
  });
  await started(client, `file data source (${name})`);
  const s = await states(client);
  client.close();
  return s;
}

async function compareEvaluations(daemon, data, name, what) {
  const want = await referenceStates(data, name);
  if (previous && canonical(previous) === canonical(want)) {
    fail(`B: ${what}: the changes do not change any evaluation (the test would not see them)`);
  }
  previous = want;
  const got = await states(daemon);
  const nflags = Object.keys(data.features).length;
  for (const s of got) {
    const n = Object.keys(s).filter((k) => !k.startsWith('$')).length;
    if (n !== nflags) fail(`B: ${what}: the daemon-mode client evaluated ${n} flags, not ${nflags}`, s);
  }
  if (canonical(got) !== canonical(want)) {
    fail(`B: ${what}: the daemon-mode client's evaluations differ from the file data source's`, { want, got });
  }
  console.log(`ok: B: ${what}: the SDK in daemon mode on ldasync's data: ${nflags} flags, ${contexts.length} contexts, states equal to the file data source's`);
}

{
  writeFileSync(`${work}/b-init.json`, JSON.stringify(initial));
  ld(PREFIX_B, 'init', `${work}/b-init.json`);

  const daemon = init('interop-sdk-key', {
    useLdd: true,
    featureStore: RedisFeatureStore({ prefix: PREFIX_B, redisOpts: { path: socket }, cacheTTL: 0 }),
    sendEvents: false,
    diagnosticOptOut: true,
    logger,
  });
  await started(daemon, 'daemon mode');
  await compareEvaluations(daemon, expected(false), 'b-before.json', 'after ldasync\'s init');

  for (const [args, what] of [
    [['upsert', 'features', JSON.stringify(upFlag)], `upsert of flag ${upFlag.key}`],
    [['upsert', 'segments', JSON.stringify(upSegment)], `upsert of segment ${upSegment.key}`],
    [['delete', 'features', delKey, String(delVersion)], `delete of flag ${delKey}`],
  ]) {
    if (ld(PREFIX_B, ...args) !== 'true') fail(`B: ldasync did not apply the ${what}`);
  }
  const want = expected(true);
  await compareEvaluations(daemon, want, 'b-after.json', 'after ldasync\'s upserts and delete');
  daemon.close();

  const node = nodeStore(PREFIX_B);
  if ((await node.initialized()) !== true) fail('B: Node\'s store says not initialized after ldasync\'s init');
  let n = 0;
  for (const [kind, ns] of [[FEATURES, 'features'], [SEGMENTS, 'segments']]) {
    const all = await node.all(kind);
    const got = {};
    for (const [k, v] of Object.entries(all)) got[k] = plain(v);
    n += compareItems(`B: ${ns} ldasync wrote, as Node's store reads them (all)`, got, want[ns]);
    for (const [k, w] of Object.entries(want[ns])) {
      const g = await node.get(kind, k);
      if (!g) fail(`B: Node's store gets no ${ns} ${k}`);
      compareItems(`B: ${ns} ldasync wrote, as Node's store reads them (get)`, { [k]: plain(g) }, { [k]: w });
    }
  }
  for (const [kind, key] of [[FEATURES, deadFlag.key], [SEGMENTS, deadSegment.key], [FEATURES, delKey]]) {
    const g = await node.get(kind, key);
    if (g !== null && g !== undefined) fail(`B: Node's store gets ${kind.namespace} ${key}, which ldasync deleted`, g);
  }
  // ldasync's tombstones stop older writes of Node's store
  await node.upsert(FEATURES, { ...clone(base.features[delKey]), version: delVersion });
  if (await node.get(FEATURES, delKey)) fail(`B: Node's store wrote ${delKey} over ldasync's tombstone of the same version`);
  node.close();
  console.log(`ok: B: ldasync wrote, Node's store read ${n} items equal (all and get), no tombstone, initialized; ldasync's tombstones hold against Node's upsert`);
}

// ---- C: the raw layout ----

function layout(prefix) {
  const out = {};
  for (const key of redis('--scan', '--pattern', `${prefix}:*`).split('\n').filter(Boolean)) {
    const name = key.slice(prefix.length + 1);
    const type = redis('TYPE', key);
    const entry = { type };
    if (type === 'hash') {
      entry.fields = {};
      for (const f of redis('HKEYS', key).split('\n').filter(Boolean)) entry.fields[f] = redis('HGET', key, f);
    } else if (type === 'string') {
      entry.value = redis('GET', key);
    }
    out[name] = entry;
  }
  return out;
}

const typesOf = (l) => Object.fromEntries(Object.entries(l).map(([k, v]) => [k, v.type]));
{
  const a = layout(PREFIX_A);
  const b = layout(PREFIX_B);
  if (!Object.keys(a).length) fail(`C: no key under ${PREFIX_A}:`);
  if (canonical(typesOf(a)) !== canonical(typesOf(b))) {
    fail('C: the keys Node wrote (A) and those ldasync wrote (B) differ in names or types', { node: typesOf(a), ldasync: typesOf(b) });
  }
  console.log(`ok: C: Node's keys (A) and ldasync's (B) are the same: ${Object.entries(typesOf(a)).map(([k, t]) => `{prefix}:${k} ${t}`).join(', ')}`);

  // the same writes by each, under prefixes of their own
  const node = nodeStore('interop-node');
  await node.init(initial);
  await node.delete(FEATURES, delKey, delVersion);
  node.close();
  ld('interop-ldasync', 'init', `${work}/b-init.json`);
  ld('interop-ldasync', 'delete', 'features', delKey, String(delVersion));
  const ln = layout('interop-node');
  const ll = layout('interop-ldasync');
  if (canonical(typesOf(ln)) !== canonical(typesOf(ll))) {
    fail('C: the same writes left keys of other names or types', { node: typesOf(ln), ldasync: typesOf(ll) });
  }
  let nfields = 0;
  for (const [name, e] of Object.entries(ln)) {
    const o = ll[name];
    if (e.type === 'string' && e.value !== o.value) {
      fail(`C: {prefix}:${name}: Node wrote ${JSON.stringify(e.value)}, ldasync ${JSON.stringify(o.value)}`);
    }
    if (e.type !== 'hash') continue;
    const fn = Object.keys(e.fields).sort();
    const fl = Object.keys(o.fields).sort();
    if (canonical(fn) !== canonical(fl)) fail(`C: {prefix}:${name}: other fields`, { node: fn, ldasync: fl });
    for (const f of fn) {
      const vn = JSON.parse(e.fields[f]);
      const vl = JSON.parse(o.fields[f]);
      nfields++;
      if (vn.deleted === true || vl.deleted === true) {
        // a tombstone: its version; "key", where there is one, is the field
        if (vn.deleted !== true || vl.deleted !== true || vn.version !== vl.version ||
            ('key' in vn && vn.key !== f) || ('key' in vl && vl.key !== f)) {
          fail(`C: {prefix}:${name} ${f}: the tombstones differ`, { node: vn, ldasync: vl });
        }
        continue;
      }
      if (canonical(vn) !== canonical(vl)) fail(`C: {prefix}:${name} ${f}: the values differ`, { node: vn, ldasync: vl });
    }
  }
  console.log(`ok: C: the same init and delete by Node and by ldasync: the same ${Object.keys(ln).length} keys, ${nfields} hash fields, values equal`);
}
process.exit(0);
