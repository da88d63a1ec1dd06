// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// bench/node-serve.js: the Node baseline of bench/serve-bench.sh: a minimal
// server written with Node's http module serving the flags of a data file
// from memory: GET /sdk/latest-flags/{key} answers the flag's JSON text
// (made once, at start), /sdk/latest-all and /sdk/latest-flags the whole
// collections (made once too).
//
// usage: node bench/node-serve.js PORT DATA_FILE
'use strict';
const fs = require('fs');
const http = require('http');

const [port, file] = process.argv.slice(2);
const data = JSON.parse(fs.readFileSync(file, 'utf8'));
const flags = data.flags || {};
const texts = new Map();
for (const [key, flag] of Object.entries(flags)) texts.set(key, Buffer.from(JSON.stringify(flag)));
const all = Buffer.from(JSON.stringify({flags, segments: data.segments || {}}));
const flagsText = Buffer.from(JSON.stringify(flags));
const prefix = '/sdk/latest-flags/';

function send(res, code, body) {
  res.writeHead(code, {'Content-Type': 'application/json', 'Content-Length': body.length});
  res.end(body);
}

http.createServer((req, res) => {
  const url = req.url;
  if (url.startsWith(prefix)) {
    const text = texts.get(decodeURIComponent(url.slice(prefix.length)));
    return text ? send(res, 200, text) : send(res, 404, Buffer.from('{"error":"no such flag"}'));
  }
  if (url === '/sdk/latest-all') return send(res, 200, all);
  if (url === '/sdk/latest-flags') return send(res, 200, flagsText);
  send(res, 404, Buffer.from('{"error":"not found"}'));
}).listen(Number(port), '127.0.0.1');
