// slidewin from Node.js with ioredis (npm install ioredis).
//
//   node examples/node/sms.js            (a server with the module on 127.0.0.1:6379)
//
// One SLIDEWIN.CHECK per SMS code request: 5 per minute per IP. With DETAIL
// the reply says how long to wait, which becomes the Retry-After header of
// an HTTP 429. On Redis Cluster use `new Redis.Cluster([...])` and put a hash
// tag in keys that one MCHECK judges together ({user:42}).
'use strict';

const Redis = require('ioredis');

const redis = new Redis({ host: '127.0.0.1', port: 6379 });

// [allowed, limit, remaining, retry_after_ms, reset_after_ms]
async function smsAllowed(ip) {
  const [allowed, limit, remaining, retryAfterMs] = await redis.call(
    'SLIDEWIN.CHECK', `sms:limit:${ip}`, 5, 60000, 'DETAIL');
  if (allowed === 1) {
    return { status: 200, headers: { 'X-RateLimit-Limit': limit, 'X-RateLimit-Remaining': remaining } };
  }
  const retry = retryAfterMs < 0 ? 'never' : String(Math.ceil(retryAfterMs / 1000));
  return { status: 429, headers: { 'Retry-After': retry } };
}

// The SMS policy: per IP 5/min, per phone 1/min and 10/day, all or nothing.
async function policyAllowed(ip, phone) {
  const reply = await redis.call('SLIDEWIN.MCHECK', 3,
    `sms:ip:${ip}`, 5, 60000,
    `sms:phone:${phone}`, 1, 60000,
    `sms:phone:${phone}`, 10, 86400000);
  return reply === 1;
}

async function main() {
  for (let i = 0; i < 6; i++) {
    console.log(await smsAllowed('203.0.113.7'));
  }
  console.log('policy:', await policyAllowed('203.0.113.7', '+8613800000000'));
  redis.disconnect();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
