#!/usr/bin/env node
// qbridge's Azure Service Bus test server: AMQP 1.0 (plain, no TLS, like the
// official emulator) on 127.0.0.1, with CBS/SAS, queues, topics,
// subscriptions, sessions, locks and $management. See docs/sbserver.md.
//
//   node e2e/sbserver/server.mjs --config FILE [--port 0] [--http-port=0|--http-port=-1] [--verbose] [--exit-with-stdin]
//
// Prints one line when ready:
//   READY {"port":N,"pid":P,"amqp":"amqp://127.0.0.1:N","httpPort":H,"http":"http://127.0.0.1:H",...}
// --http-port=-1 turns the REST data plane off (with "=": node:util parseArgs
// takes a separate "-1" for an option).
import { parseArgs } from 'node:util';
import { loadConfigFile, normalizeConfig } from './lib/config.mjs';
import { Namespace } from './lib/store.mjs';
import { AmqpServer } from './lib/amqp.mjs';
import { RestServer } from './lib/rest.mjs';

const { values } = parseArgs({
  options: {
    config: { type: 'string' },
    'config-json': { type: 'string' },
    port: { type: 'string', default: '0' },
    'http-port': { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    verbose: { type: 'boolean', default: false },
    'cbs-grace-ms': { type: 'string', default: '20000' },
    'session-accept-timeout-ms': { type: 'string', default: '60000' },
    'exit-with-stdin': { type: 'boolean', default: false },
  },
});

function fail(msg) {
  process.stderr.write(`sbserver: ${msg}\n`);
  process.exit(2);
}

if (values.host !== '127.0.0.1' && values.host !== 'localhost' && values.host !== '::1') {
  fail('--host must be a loopback address');
}
let cfg;
try {
  if (values.config) cfg = loadConfigFile(values.config);
  else if (values['config-json']) cfg = normalizeConfig(JSON.parse(values['config-json']));
  else fail('--config FILE (or --config-json TEXT) is required');
} catch (e) {
  fail(`bad config: ${e.message}`);
}

const log = values.verbose
  ? (m) => process.stderr.write(`${new Date().toISOString()} sbserver: ${m}\n`)
  : () => {};
const ns = new Namespace(cfg, { log });
const amqp = new AmqpServer(ns, {
  cbsGraceMs: Number(values['cbs-grace-ms']),
  sessionAcceptTimeoutMs: Number(values['session-accept-timeout-ms']),
});
const port = await amqp.listen(Number(values.port), values.host);
let rest = null;
let httpPort = null;
if (Number(values['http-port']) >= 0) {
  rest = new RestServer(ns, amqp.auth);
  httpPort = await rest.listen(Number(values['http-port']), values.host);
}
process.stdout.write(`READY ${JSON.stringify({
  port,
  pid: process.pid,
  amqp: `amqp://127.0.0.1:${port}`,
  httpPort,
  http: httpPort === null ? null : `http://127.0.0.1:${httpPort}`,
  namespace: cfg.namespace,
  queues: cfg.queues.map((q) => q.name),
  topics: cfg.topics.map((t) => t.name),
})}\n`);

function shutdown() {
  amqp.close();
  if (rest) rest.close();
  ns.close();
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
if (values['exit-with-stdin']) {
  // The starter holds the write end of our stdin and never writes: when it
  // ends, even by SIGKILL (a test binary past its -timeout), the pipe
  // closes and the server goes with it instead of staying behind.
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
  process.stdin.resume();
}
