// The official JavaScript SDK (@azure/service-bus, pinned in package.json)
// against qbridge's Service Bus test server. Run by sbconformance's Go test
// TestJavaScriptSDK with SB_CONNECTION_STRING, SB_PORT, SB_KEY_NAME, SB_KEY
// set; prints one line per check and a closing "N passed, N failed" line;
// exits non-zero on any failure.
import { ServiceBusClient } from '@azure/service-bus';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(import.meta.url);
const rhea = require('rhea'); // the AMQP library under @azure/service-bus (via rhea-promise)

const CS = process.env.SB_CONNECTION_STRING;
const PORT = Number(process.env.SB_PORT);
const KEY_NAME = process.env.SB_KEY_NAME;
const KEY = process.env.SB_KEY;
if (!CS || !PORT || !KEY_NAME || !KEY) {
  console.error('SB_CONNECTION_STRING, SB_PORT, SB_KEY_NAME and SB_KEY must be set');
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const client = new ServiceBusClient(CS, { retryOptions: { maxRetries: 1, retryDelayInMs: 100, timeoutInMs: 10_000 } });

async function receiveN(receiver, n, timeoutMs = 5000) {
  const got = [];
  const deadline = Date.now() + timeoutMs;
  while (got.length < n && Date.now() < deadline) {
    const msgs = await receiver.receiveMessages(n - got.length, { maxWaitTimeInMs: Math.max(100, deadline - Date.now()) });
    got.push(...msgs);
  }
  assert.equal(got.length, n, `received ${got.length} of ${n} messages`);
  return got;
}

async function receiveNone(receiver, ms = 500) {
  const msgs = await receiver.receiveMessages(10, { maxWaitTimeInMs: ms });
  assert.equal(msgs.length, 0, `expected no message, got ${msgs.length}`);
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('send, receive in order, complete (broker properties set)', async () => {
  const s = client.createSender('js-basic');
  await s.sendMessages([{ body: 'm0' }, { body: 'm1' }, { body: 'm2' }]);
  const r = client.createReceiver('js-basic');
  const t0 = Date.now();
  const msgs = await receiveN(r, 3);
  assert.deepEqual(msgs.map((m) => m.body), ['m0', 'm1', 'm2']);
  let last = -1;
  for (const m of msgs) {
    // the JS SDK reports the wire header delivery-count (prior failed
    // deliveries) as is, without the +1 that Go and .NET add (§1 table)
    assert.equal(m.deliveryCount, 0);
    assert.equal(m.state, 'active');
    assert.ok(m.lockToken && /^[0-9a-f-]{36}$/.test(m.lockToken), `lockToken ${m.lockToken}`);
    assert.ok(m.sequenceNumber.toNumber() > last);
    last = m.sequenceNumber.toNumber();
    assert.ok(m.enqueuedTimeUtc instanceof Date);
    assert.ok(Math.abs(m.lockedUntilUtc.getTime() - (t0 + 5000)) < 2000, `lockedUntilUtc ${m.lockedUntilUtc.toISOString()}`);
    await r.completeMessage(m);
  }
  await receiveNone(r, 300);
  await r.close();
  await s.close();
});

test('properties survive send -> receive', async () => {
  const s = client.createSender('js-props');
  const when = new Date(Date.UTC(2024, 1, 29, 13, 14, 15, 123));
  await s.sendMessages({
    body: { hello: 'world', n: 1 },
    messageId: 'js-msg-1',
    correlationId: 'js-corr',
    contentType: 'application/json',
    subject: 'subj',
    to: 'to-addr',
    replyTo: 'reply-q',
    replyToSessionId: 'reply-s',
    sessionId: 'js-s',
    partitionKey: 'js-s',
    timeToLive: 60_000,
    applicationProperties: { str: 'x', int: 42, neg: -7, float: 1.25, bool: true, date: when },
  });
  const r = client.createReceiver('js-props');
  const [m] = await receiveN(r, 1);
  assert.deepEqual(m.body, { hello: 'world', n: 1 });
  assert.equal(m.messageId, 'js-msg-1');
  assert.equal(m.correlationId, 'js-corr');
  assert.equal(m.contentType, 'application/json');
  assert.equal(m.subject, 'subj');
  assert.equal(m.to, 'to-addr');
  assert.equal(m.replyTo, 'reply-q');
  assert.equal(m.replyToSessionId, 'reply-s');
  assert.equal(m.sessionId, 'js-s');
  assert.equal(m.partitionKey, 'js-s');
  assert.equal(m.timeToLive, 60_000);
  assert.equal(m.applicationProperties.str, 'x');
  assert.equal(m.applicationProperties.int, 42);
  assert.equal(m.applicationProperties.neg, -7);
  assert.equal(m.applicationProperties.float, 1.25);
  assert.equal(m.applicationProperties.bool, true);
  assert.equal(new Date(m.applicationProperties.date).getTime(), when.getTime());
  await r.completeMessage(m);
  await r.close();
  await s.close();
});

test('abandon: delivery count +1, properties to modify', async () => {
  const s = client.createSender('js-abandon');
  await s.sendMessages({ body: 'a' });
  const r = client.createReceiver('js-abandon');
  const [m1] = await receiveN(r, 1);
  assert.equal(m1.deliveryCount, 0);
  await r.abandonMessage(m1, { hello: 'world' });
  const [m2] = await receiveN(r, 1);
  assert.equal(m2.deliveryCount, 1);
  assert.equal(m2.applicationProperties.hello, 'world');
  assert.equal(m2.sequenceNumber.toNumber(), m1.sequenceNumber.toNumber());
  await r.completeMessage(m2);
  await r.close();
  await s.close();
});

test('dead-letter with reason/description, read from the DLQ', async () => {
  const s = client.createSender('js-dlq');
  await s.sendMessages({ body: 'poison' });
  const r = client.createReceiver('js-dlq');
  const [m] = await receiveN(r, 1);
  await r.deadLetterMessage(m, { deadLetterReason: 'JsReason', deadLetterErrorDescription: 'js description' });
  await receiveNone(r, 300);
  const d = client.createReceiver('js-dlq', { subQueueType: 'deadLetter' });
  const [dm] = await receiveN(d, 1);
  assert.equal(dm.body, 'poison');
  assert.equal(dm.deadLetterReason, 'JsReason');
  assert.equal(dm.deadLetterErrorDescription, 'js description');
  assert.equal(dm.deadLetterSource, 'js-dlq');
  await d.completeMessage(dm);
  await d.close();
  await r.close();
  await s.close();
});

test('defer, then receive deferred by sequence number', async () => {
  const s = client.createSender('js-defer');
  await s.sendMessages({ body: 'later' });
  const r = client.createReceiver('js-defer');
  const [m] = await receiveN(r, 1);
  await r.deferMessage(m);
  await receiveNone(r, 300);
  const peeked = await r.peekMessages(10, { fromSequenceNumber: m.sequenceNumber });
  assert.equal(peeked.length, 1);
  assert.equal(peeked[0].state, 'deferred');
  const [dm] = await r.receiveDeferredMessages(m.sequenceNumber);
  assert.equal(dm.body, 'later');
  assert.equal(dm.state, 'deferred');
  await r.completeMessage(dm);
  assert.equal((await r.peekMessages(10, { fromSequenceNumber: m.sequenceNumber })).length, 0);
  await r.close();
  await s.close();
});

test('renew lock extends lockedUntilUtc', async () => {
  const s = client.createSender('js-renew');
  await s.sendMessages({ body: 'r' });
  const r = client.createReceiver('js-renew', { maxAutoLockRenewalDurationInMs: 0 });
  const [m] = await receiveN(r, 1);
  const first = m.lockedUntilUtc.getTime(); // lock duration 4 s
  await sleep(1500);
  const renewed = await r.renewMessageLock(m);
  assert.ok(renewed.getTime() > first + 1000, `renewed ${renewed.toISOString()} vs first ${new Date(first).toISOString()}`);
  await sleep(first - Date.now() + 500); // past the first expiry
  await r.completeMessage(m);
  await r.close();
  await s.close();
});

test('schedule, cancel, arrives not before its time', async () => {
  const s = client.createSender('js-sched');
  const at = new Date(Date.now() + 1500);
  const seqs = await s.scheduleMessages([{ body: 'keep' }, { body: 'cancel' }], at);
  assert.equal(seqs.length, 2);
  await s.cancelScheduledMessages(seqs[1]);
  const r = client.createReceiver('js-sched');
  const peeked = await r.peekMessages(10);
  assert.equal(peeked.length, 1);
  assert.equal(peeked[0].state, 'scheduled');
  await receiveNone(r, 500);
  const [m] = await receiveN(r, 1, 5000);
  assert.equal(m.body, 'keep');
  assert.ok(m.enqueuedTimeUtc.getTime() >= at.getTime(), `enqueued ${m.enqueuedTimeUtc.toISOString()} before ${at.toISOString()}`);
  await r.completeMessage(m);
  await receiveNone(r, 300);
  await r.close();
  await s.close();
});

test('sessions: specific, next available, order, one receiver per session, state, lock renew', async () => {
  const s = client.createSender('js-sess');
  await s.sendMessages([
    { body: 'a0', sessionId: 'A' }, { body: 'b0', sessionId: 'B' }, { body: 'a1', sessionId: 'A' },
    { body: 'a2', sessionId: 'A' }, { body: 'b1', sessionId: 'B' },
  ]);
  const ra = await client.acceptSession('js-sess', 'A');
  assert.equal(ra.sessionId, 'A');
  assert.ok(ra.sessionLockedUntilUtc instanceof Date && ra.sessionLockedUntilUtc.getTime() > Date.now());
  await assert.rejects(client.acceptSession('js-sess', 'A', { maxAutoLockRenewalDurationInMs: 0 }), 'second receiver for a locked session');
  const ma = await receiveN(ra, 3);
  assert.deepEqual(ma.map((m) => m.body), ['a0', 'a1', 'a2']);
  for (const m of ma) await ra.completeMessage(m);
  assert.equal(await ra.getSessionState(), null);
  await ra.setSessionState('state-A');
  assert.equal(String(await ra.getSessionState()), 'state-A');
  const before = ra.sessionLockedUntilUtc.getTime();
  await sleep(50);
  const renewed = await ra.renewSessionLock();
  assert.ok(renewed.getTime() > before, 'session lock renewed');
  const rb = await client.acceptNextSession('js-sess');
  assert.equal(rb.sessionId, 'B');
  const mb = await receiveN(rb, 2);
  assert.deepEqual(mb.map((m) => m.body), ['b0', 'b1']);
  for (const m of mb) await rb.completeMessage(m);
  await rb.close();
  await ra.close();
  const again = await client.acceptSession('js-sess', 'A');
  assert.equal(String(await again.getSessionState()), 'state-A');
  await again.close();
  await s.close();
});

test('topic fan-out to every subscription', async () => {
  const s = client.createSender('js-topic');
  await s.sendMessages({ body: 'fan' });
  for (const sub of ['x', 'y']) {
    const r = client.createReceiver('js-topic', sub);
    const [m] = await receiveN(r, 1);
    assert.equal(m.body, 'fan');
    await r.completeMessage(m);
    await r.close();
  }
  await s.close();
});

test('wrong key is refused', async () => {
  const bad = new ServiceBusClient(CS.replace(`SharedAccessKey=${KEY}`, 'SharedAccessKey=wrong'), { retryOptions: { maxRetries: 0, timeoutInMs: 5000 } });
  const s = bad.createSender('js-basic');
  await assert.rejects(s.sendMessages({ body: 'x' }), (e) => /unauthori/i.test(`${e.code} ${e.message}`) || e.code === 'UnauthorizedError');
  await bad.close();
});

// ---- raw AMQP checks with rhea (the SDK's own AMQP library) ----

function rawConnect(opts) {
  const container = rhea.create_container();
  container.on('error', () => {}); // link errors are asserted through link events
  const conn = container.connect({ host: '127.0.0.1', port: PORT, reconnect: false, ...opts });
  return new Promise((resolve, reject) => {
    conn.once('connection_open', () => resolve({ container, conn }));
    conn.once('connection_error', (ctx) => reject(ctx.connection.error));
    conn.once('disconnected', (ctx) => reject(ctx.error || new Error('disconnected')));
  });
}

test('raw: SASL PLAIN with the key, server-side size limit (amqp:link:message-size-exceeded)', async () => {
  const { conn } = await rawConnect({ username: KEY_NAME, password: KEY });
  const sender = conn.open_sender('js-basic');
  await new Promise((res) => sender.once('sendable', res));
  assert.equal(sender.max_message_size, 256 * 1024, 'attach advertises max-message-size');
  const outcome = await new Promise((resolve) => {
    sender.once('rejected', (ctx) => resolve(ctx.delivery.remote_state));
    sender.once('accepted', () => resolve('accepted'));
    sender.send({ body: rhea.message.data_section(Buffer.alloc(300 * 1024, 1)) });
  });
  assert.notEqual(outcome, 'accepted');
  assert.equal(outcome.error.condition, 'amqp:link:message-size-exceeded');
  conn.close();
});

test('raw: no token -> link refused with amqp:unauthorized-access; forged token -> put-token status-code 401', async () => {
  const { conn } = await rawConnect({});
  const refused = await new Promise((resolve) => {
    const l = conn.open_sender('js-basic');
    l.once('sender_error', (ctx) => resolve(ctx.sender.error));
    l.once('sender_close', (ctx) => resolve(ctx.sender.error));
  });
  assert.equal(refused.condition, 'amqp:unauthorized-access');
  const replyTo = 'cbs-reply-1';
  const rcv = conn.open_receiver({ source: { address: '$cbs' }, target: { address: replyTo } });
  const snd = conn.open_sender('$cbs');
  await new Promise((res) => snd.once('sendable', res));
  const res = await new Promise((resolve) => {
    rcv.once('message', (ctx) => resolve(ctx.message));
    const se = Math.floor(Date.now() / 1000) + 3600;
    snd.send({
      message_id: 'req-1',
      reply_to: replyTo,
      application_properties: { operation: 'put-token', type: 'servicebus.windows.net:sastoken', name: `sb://localhost:${PORT}/js-basic` },
      body: `SharedAccessSignature sr=sb%3a%2f%2flocalhost%3a${PORT}%2fjs-basic&sig=AAAA&se=${se}&skn=${KEY_NAME}`,
    });
  });
  assert.equal(res.correlation_id, 'req-1');
  assert.equal(res.application_properties['status-code'], 401);
  conn.close();
});

let passed = 0;
let failed = 0;
for (const { name, fn } of tests) {
  const t0 = Date.now();
  try {
    await Promise.race([fn(), sleep(30_000).then(() => { throw new Error('timed out after 30 s'); })]);
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    const inner = e && Array.isArray(e.errors) ? e.errors.map((x) => `\n  caused by: ${x && x.stack ? x.stack : x}`).join('') : '';
    console.log(`FAIL ${name} (${Date.now() - t0} ms): ${e && e.stack ? e.stack : e}${inner}`);
  }
}
await client.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
