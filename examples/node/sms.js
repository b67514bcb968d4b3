// slidewin from Node.js with node-redis, the official `redis` client (v4;
// `npm install redis`, or Debian's node-redis package, which the suite uses).
//
//   node examples/node/sms.js [--port 6379]    (a server with the module on 127.0.0.1)
//
// With Debian's node-redis and a node that is not Debian's own (NodeSource's,
// say), point node at Debian's modules: NODE_PATH=/usr/share/nodejs.
//
// One SLIDEWIN.CHECK per SMS code request: 5 per minute per IP. With DETAIL
// the reply says how long to wait, which becomes the Retry-After header of
// an HTTP 429. The SMS policy (per IP 5/min, per phone 1/min and 10/day) is
// one MCHECK, all or nothing; the hash tag {phone} keeps its keys in one
// cluster slot, so on Redis Cluster use `createCluster({ rootNodes: [...] })`
// and the same calls.
//
// With ioredis instead: `const redis = new Redis(port)` and
// `await redis.call('SLIDEWIN.CHECK', key, 5, 60000, 'DETAIL')`; replies are
// the same arrays of integers.
'use strict';

const { createClient } = require('redis');

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 6379;
const client = createClient({ socket: { host: '127.0.0.1', port } });

// DETAIL: [allowed, limit, remaining, retry_after_ms, reset_after_ms]
async function smsAllowed(ip) {
  const [allowed, limit, remaining, retryAfterMs] = await client.sendCommand(
    ['SLIDEWIN.CHECK', `sms:limit:${ip}`, '5', '60000', 'DETAIL']);
  if (allowed === 1) {
    return { status: 200, headers: { 'RateLimit-Limit': limit, 'RateLimit-Remaining': remaining } };
  }
  // -1: the call can never fit (cost above the limit).
  const retry = retryAfterMs < 0 ? 'never' : String(Math.ceil(retryAfterMs / 1000));
  return { status: 429, headers: { 'Retry-After': retry } };
}

// The SMS policy: per IP 5/min, per phone 1/min and 10/day, all or nothing.
async function policyAllowed(ip, phone) {
  const tag = `{${phone}}`;
  const reply = await client.sendCommand(['SLIDEWIN.MCHECK', '3',
    `sms:${tag}:ip:${ip}`, '5', '60000',
    `sms:${tag}:phone`, '1', '60000',
    `sms:${tag}:phone`, '10', '86400000']);
  return reply === 1;
}

async function main() {
  await client.connect();
  const statuses = [];
  let last;
  for (let i = 0; i < 6; i++) {
    last = await smsAllowed('203.0.113.31');
    statuses.push(last.status);
  }
  console.log('six requests from one IP:', statuses.join(' '));
  console.log('the sixth:', JSON.stringify(last.headers));
  console.log('policy, first code:', await policyAllowed('203.0.113.32', '+8613800000031'));
  console.log('policy, second code:', await policyAllowed('203.0.113.32', '+8613800000031'));
  await client.quit();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
