// Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
//
// A stand-in for LaunchDarkly's events service, for node-sdk.sh: every POST
// is answered 202 and written to OUTFILE as one JSON line
// {"path", "authorization", "schema", "body"}.
//
// usage: node events-receiver.mjs PORT OUTFILE
import { createServer } from 'node:http';
import { appendFileSync } from 'node:fs';

const [port, out] = [Number(process.argv[2]), process.argv[3]];
createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'POST') {
      appendFileSync(out, `${JSON.stringify({
        path: req.url,
        authorization: req.headers.authorization || '',
        schema: req.headers['x-launchdarkly-event-schema'] || '',
        body: Buffer.concat(chunks).toString('utf8'),
      })}\n`);
    }
    res.writeHead(req.method === 'POST' ? 202 : 404);
    res.end();
  });
}).listen(port, '127.0.0.1', () => console.error(`events receiver on ${port}`));
