// AMQP 1.0 transport (rhea as a server): SASL, CBS, links to entities,
// deliveries with lock tokens, dispositions, sessions, $management.
import { createRequire } from 'node:module';
import {
  types, rheaMessage, parseMessage, BATCH_FORMAT, plain, isNullTyped, typedMapEntries, encodeProperties,
  encodeMapSection, encodeValueSection, SEC, tInt, tString, tNull, tSymbol, uuidToDotNet, newUuid, msToTicks,
  sectionPlain,
} from './codec.mjs';
import { SbError, COND, StoredMessage } from './store.mjs';
import { Authenticator, Claims, AuthError, SAS_TOKEN_TYPE } from './auth.mjs';
import { Management } from './mgmt.mjs';

// settleOutgoing settles a delivery this server sent with the outcome it
// decided. A delivery its sender settled is done for the receiver too,
// which sends nothing more for it; rhea frees an outgoing delivery only
// once both ends settled, so without this the session's outgoing buffer
// kept every one and overflowed after 2,048 deliveries.
function settleOutgoing(delivery, state) {
  delivery.update(true, state);
  delivery.remote_settled = true;
}

const require = createRequire(import.meta.url);
const rhea = require('rhea');

// Keep the raw bytes of every incoming format-0 message: rhea's decoder
// drops AMQP types (int8 vs int32, symbol vs string), and the store must
// re-encode exactly what the client sent.
const origDecode = rheaMessage.decode;
rheaMessage.decode = function decodeKeepingRaw(buf) {
  let m;
  try {
    m = origDecode(buf);
  } catch (e) {
    m = { decodeError: e };
  }
  Object.defineProperty(m, '__raw', { value: buf, enumerable: false });
  return m;
};

const SESSION_FILTER = 'com.microsoft:session-filter';
const LOCKED_UNTIL_PROP = 'com.microsoft:locked-until-utc';
const TIMEOUT_PROP = 'com.microsoft:timeout';

function errorObj(condition, description) {
  return { condition, description };
}

// SASL PLAIN: user = SAS rule name, password = its key (docs/wire-servicebus.md §0).
class PlainMechanism {
  constructor(auth) {
    this.auth = auth;
    this.outcome = undefined;
    this.username = undefined;
    this.claim = null;
  }
  start(response) {
    const parts = Buffer.from(response || []).toString('utf8').split('\u0000');
    if (parts.length !== 3) {
      this.outcome = false;
      return;
    }
    const claim = this.auth.verifyPlain(parts[1], parts[2]);
    this.outcome = Boolean(claim);
    this.username = parts[1];
    this.claim = claim;
  }
}

export class AmqpServer {
  constructor(ns, opts = {}) {
    this.ns = ns;
    this.opts = { cbsGraceMs: 20_000, sessionAcceptTimeoutMs: 60_000, ...opts };
    this.log = ns.log;
    this.auth = new Authenticator(ns);
    this.mgmt = new Management(ns, this);
    this.connections = new Set();
    this.waiting = new Set(); // next-available session attaches
    this.container = rhea.create_container({ id: 'qbridge-sbserver' });
    const mechs = this.container.sasl_server_mechanisms;
    mechs.enable_anonymous();
    mechs.PLAIN = () => new PlainMechanism(this.auth);
    this.wire();
    ns.onAvailable((entity) => this.onAvailable(entity));
    this.timer = setInterval(() => this.tick(), 250);
    this.timer.unref?.();
  }

  listen(port, host = '127.0.0.1') {
    return new Promise((resolve, reject) => {
      const server = this.container.listen({
        port,
        host,
        sender_options: { autosettle: true, treat_modified_as_released: false },
        receiver_options: { autoaccept: false, credit_window: 300 },
        idle_time_out: 120_000,
        // Nagle's algorithm held each small frame behind the client's
        // delayed ACK: about 40 ms a round trip on loopback.
        tcp_no_delay: true,
        container_id: 'qbridge-sbserver',
      });
      server.once('listening', () => {
        this.server = server;
        resolve(server.address().port);
      });
      server.once('error', reject);
    });
  }

  close() {
    clearInterval(this.timer);
    for (const c of this.connections) {
      try {
        c.close();
      } catch {}
    }
    if (this.server) this.server.close();
  }

  wire() {
    const c = this.container;
    c.on('connection_open', (ctx) => this.onConnectionOpen(ctx.connection));
    c.on('connection_close', (ctx) => this.onConnectionGone(ctx.connection));
    c.on('disconnected', (ctx) => this.onConnectionGone(ctx.connection));
    c.on('connection_error', (ctx) => this.log(`connection error: ${JSON.stringify(ctx.connection.error)}`));
    c.on('session_error', (ctx) => this.log(`session error: ${JSON.stringify(ctx.session.error)}`));
    c.on('receiver_open', (ctx) => this.guard(() => this.onReceiverOpen(ctx.connection, ctx.receiver)));
    c.on('sender_open', (ctx) => this.guard(() => this.onSenderOpen(ctx.connection, ctx.sender)));
    c.on('receiver_close', (ctx) => this.onLinkGone(ctx.receiver));
    c.on('sender_close', (ctx) => this.onLinkGone(ctx.sender));
    c.on('receiver_error', () => {});
    c.on('sender_error', () => {});
    c.on('message', (ctx) => this.guard(() => this.onMessage(ctx)));
    c.on('sender_flow', (ctx) => this.guard(() => this.onFlow(ctx.sender)));
    c.on('sendable', () => {});
    for (const ev of ['accepted', 'released', 'rejected', 'modified']) {
      c.on(ev, (ctx) => this.guard(() => this.onOutcome(ev, ctx.delivery)));
    }
    c.on('settled', () => {});
    c.on('error', (e) => this.log(`container error: ${e && e.message}`));
  }

  guard(fn) {
    try {
      fn();
    } catch (e) {
      this.log(`internal error: ${e && e.stack ? e.stack : e}`);
    }
  }

  // ---- connections ----

  onConnectionOpen(conn) {
    if (conn.sb) return;
    conn.sb = { claims: new Claims(), links: new Set(), consumers: new Set(), replyLinks: new Map() };
    this.connections.add(conn);
    const st = conn.sasl_transport;
    const mech = st && (st.mechanism || (st.transports && st.transports[3] && st.transports[3].mechanism));
    if (mech instanceof PlainMechanism && mech.claim) conn.sb.claims.add(mech.claim);
    if (this.opts.cbsGraceMs > 0) {
      // docs/wire-servicebus.md §3.1: a valid token must be put within 20 s of opening.
      conn.sb.graceTimer = setTimeout(() => {
        if (!conn.sb.claims.everAccepted && conn.is_open()) {
          this.log('closing a connection that put no valid token in time');
          conn.close(errorObj(COND.unauthorized, 'No valid token was put on $cbs within 20 seconds of opening the connection.'));
        }
      }, this.opts.cbsGraceMs);
      conn.sb.graceTimer.unref?.();
    }
  }

  onConnectionGone(conn) {
    if (!conn.sb || conn.sb.gone) return;
    conn.sb.gone = true;
    clearTimeout(conn.sb.graceTimer);
    this.connections.delete(conn);
    // Waiters first: removing a consumer releases its session, which would
    // otherwise be granted to a waiting link of this same, gone connection
    // and stay locked for the lock duration.
    for (const w of [...this.waiting]) if (w.conn === conn) this.waiting.delete(w);
    for (const c of [...conn.sb.consumers]) this.removeConsumer(c);
  }

  // ---- link attach ----

  refuse(link, condition, description) {
    this.log(`refusing link ${link.name}: ${condition} ${description}`);
    if (link.is_sender()) link.local.attach.source = null;
    else link.local.attach.target = null;
    link.close(errorObj(condition, description));
  }

  address(t) {
    return t && typeof t.address === 'string' ? t.address : undefined;
  }

  echoTermini(link) {
    const src = link.remote.attach.source;
    const tgt = link.remote.attach.target;
    link.local.attach.snd_settle_mode = link.remote.attach.snd_settle_mode;
    link.local.attach.rcv_settle_mode = link.remote.attach.rcv_settle_mode;
    return { src, tgt };
  }

  requireClaim(conn, link, path, right) {
    if (conn.sb.claims.allows(path, right)) return true;
    this.refuse(link, COND.unauthorized, `Unauthorized access. '${right}' claim(s) are required to perform this operation. Resource: '${path}'.`);
    return false;
  }

  // peer sends to us: $cbs requests, $management requests, entity sends
  onReceiverOpen(conn, link) {
    this.onConnectionOpen(conn);
    const { src, tgt } = this.echoTermini(link);
    const addr = this.address(tgt);
    link.set_source({ address: this.address(src) });
    link.set_target({ address: addr });
    link.local.attach.rcv_settle_mode = 0; // we settle on our first disposition
    if (addr === '$cbs') {
      link.sb = { kind: 'cbs' };
      return;
    }
    const r = this.ns.resolve(addr);
    if (!r) return this.refuse(link, COND.notFound, `The messaging entity '${addr}' could not be found.`);
    if (r.mgmt) {
      if (!conn.sb.claims.allows(r.authPath, 'Listen') && !conn.sb.claims.allows(r.authPath, 'Send')) {
        return this.refuse(link, COND.unauthorized, `Unauthorized access to '${r.authPath}'.`);
      }
      link.sb = { kind: 'mgmt', resolved: r };
      conn.sb.links.add({ link, path: r.authPath, right: null });
      return;
    }
    if (!r.target) return this.refuse(link, COND.notAllowed, `Cannot send to '${addr}': only queues and topics accept messages.`);
    if (!this.requireClaim(conn, link, r.path, 'Send')) return;
    link.local.attach.max_message_size = r.target.props.maxMessageSizeInKilobytes * 1024;
    link.sb = { kind: 'entity-in', resolved: r };
    conn.sb.links.add({ link, path: r.path, right: 'Send' });
  }

  // peer receives from us: $cbs / $management replies, entity receivers
  onSenderOpen(conn, link) {
    this.onConnectionOpen(conn);
    const { src, tgt } = this.echoTermini(link);
    const addr = this.address(src);
    const replyTo = this.address(tgt);
    if (addr === '$cbs' || /\/\$management$/i.test(addr || '')) {
      link.set_source({ address: addr });
      link.set_target({ address: replyTo });
      // Replies are routed by the request's reply-to: the Go SDK puts the
      // receiver's target address there, the JS SDK its link name.
      link.sb = { kind: 'reply', replyTo, names: [replyTo, link.name].filter(Boolean) };
      for (const n of link.sb.names) conn.sb.replyLinks.set(n, link);
      if (addr !== '$cbs') {
        const r = this.ns.resolve(addr);
        if (!r) return this.refuse(link, COND.notFound, `The messaging entity '${addr}' could not be found.`);
      }
      return;
    }
    const r = this.ns.resolve(addr);
    if (!r) return this.refuse(link, COND.notFound, `The messaging entity '${addr}' could not be found.`);
    if (!r.entity) return this.refuse(link, COND.notAllowed, `Cannot receive from topic '${addr}': receive from one of its subscriptions.`);
    if (!this.requireClaim(conn, link, r.path, 'Listen')) return;
    const entity = r.entity;
    const mode = link.remote.attach.snd_settle_mode === 1 ? 'rnd' : 'peeklock';
    const consumer = {
      conn, link, entity, mode, sessionId: undefined, sessionObj: null,
      sessionLockLost: (id) => this.guard(() => {
        this.log(`session lock lost: ${entity.path} session=${id}`);
        link.close(errorObj(COND.sessionLockLost, `The session lock has expired on the MessageSession. Session: ${id}.`));
      }),
    };
    link.sb = { kind: 'entity-out', consumer };
    conn.sb.links.add({ link, path: r.path, right: 'Listen' });

    const filter = src && src.filter ? src.filter : {};
    const hasSessionFilter = Object.prototype.hasOwnProperty.call(filter, SESSION_FILTER);
    const srcFields = { address: addr };
    link.set_source(srcFields);
    link.set_target({ address: replyTo });
    if (!entity.requiresSession) {
      if (hasSessionFilter) {
        return this.refuse(link, COND.notAllowed, `'${entity.path}' is not session-enabled: a session receiver cannot be created.`);
      }
      this.addConsumer(consumer);
      return;
    }
    if (!hasSessionFilter) {
      return this.refuse(link, COND.notAllowed, `'${entity.path}' requires sessions: use a session receiver (${SESSION_FILTER}).`);
    }
    const raw = filter[SESSION_FILTER];
    const isDescribed = Boolean(raw && typeof raw === 'object' && raw.descriptor);
    let wanted;
    if (isDescribed) wanted = raw.type && raw.type.name === 'Null' ? null : raw.value;
    else wanted = raw === undefined || raw === null ? null : raw;
    if (wanted !== null && wanted !== undefined && typeof wanted !== 'string') wanted = String(wanted);
    if (wanted === undefined) wanted = null;
    consumer.filterEcho = (id) => (isDescribed ? types.described(raw.descriptor, tString(id)) : tString(id));
    if (wanted !== null) {
      try {
        const s = entity.lockSession(String(wanted), consumer);
        this.bindSession(consumer, s);
      } catch (e) {
        if (e instanceof SbError) return this.refuse(link, e.condition, e.description);
        throw e;
      }
      return;
    }
    const s = entity.nextSession();
    if (s) {
      entity.lockSession(s.id, consumer);
      this.bindSession(consumer, s);
      return;
    }
    // Wait for a session to become available (com.microsoft:timeout, ms).
    const props = link.remote.attach.properties || {};
    const tmo = props[TIMEOUT_PROP] !== undefined ? Number(plain(props[TIMEOUT_PROP])) : this.opts.sessionAcceptTimeoutMs;
    link.state.local_open = false;
    link.state.open_requests = Math.max(0, link.state.open_requests - 1);
    this.waiting.add({ conn, link, consumer, entity, deadline: Date.now() + tmo });
    this.log(`waiting up to ${tmo} ms for a session on ${entity.path}`);
  }

  bindSession(consumer, s) {
    const link = consumer.link;
    consumer.sessionId = s.id;
    consumer.sessionObj = s;
    const fields = { address: this.address(link.remote.attach.source), filter: { [SESSION_FILTER]: consumer.filterEcho(s.id) } };
    link.set_source(fields);
    const ticks = msToTicks(s.lockedUntil);
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(ticks);
    link.local.attach.properties = { [LOCKED_UNTIL_PROP]: types.Long(b) };
    this.log(`session ${s.id} on ${consumer.entity.path} locked by link ${link.name}`);
    this.addConsumer(consumer);
  }

  addConsumer(consumer) {
    consumer.entity.consumers.add(consumer);
    consumer.conn.sb.consumers.add(consumer);
    // A fresh link: the drain override answers drains even at zero credit.
    const link = consumer.link;
    link._get_drain = function getDrain() {
      if (this._draining && this._sbDrain) {
        this.delivery_count += this.credit;
        this.credit = 0;
        this._sbDrain = false;
        this._draining = false;
        return true;
      }
      return false;
    };
    this.onAvailable(consumer.entity);
  }

  removeConsumer(consumer) {
    if (consumer.removed) return;
    consumer.removed = true;
    consumer.entity.consumers.delete(consumer);
    consumer.conn.sb.consumers.delete(consumer);
    if (consumer.sessionObj) consumer.entity.releaseSession(consumer.sessionObj, consumer);
  }

  onLinkGone(link) {
    if (!link || !link.sb) return;
    const conn = link.connection;
    if (conn.sb) {
      for (const l of [...conn.sb.links]) if (l.link === link) conn.sb.links.delete(l);
      if (link.sb.kind === 'reply') {
        for (const n of link.sb.names) if (conn.sb.replyLinks.get(n) === link) conn.sb.replyLinks.delete(n);
      }
    }
    if (link.sb.kind === 'entity-out') {
      const c = link.sb.consumer;
      for (const w of [...this.waiting]) {
        if (w.link === link) {
          this.waiting.delete(w);
          link.state.open();
        }
      }
      this.removeConsumer(c);
    }
  }

  // ---- delivery to receivers ----

  pendingOn(link) {
    const out = link.session.outgoing;
    let n = 0;
    for (let id = out.next_pending_delivery; id < out.next_delivery_id; id++) {
      const d = out.deliveries.by_id(id);
      if (d && d.link === link) n++;
    }
    return n;
  }

  credit(consumer) {
    const l = consumer.link;
    if (!l.is_open() || consumer.removed) return 0;
    // Never more than the session's outgoing buffer holds (rhea keeps
    // 2,048 deliveries until both ends settled them, and throws past
    // that): a receiver granting more credit waits for its settlements,
    // after which onOutcome pumps again.
    return Math.min(l.credit - this.pendingOn(l), l.session.outgoing.deliveries.available());
  }

  onFlow(link) {
    if (!link.sb || link.sb.kind !== 'entity-out') return;
    const c = link.sb.consumer;
    this.pump(c.entity);
    if (link._draining) {
      link._sbDrain = true;
      link.issue_flow = true;
      link.connection._register();
    }
  }

  onAvailable(entity) {
    this.pump(entity);
    this.serveWaiting(entity);
  }

  pump(entity) {
    const consumers = [...entity.consumers];
    if (!consumers.length) return;
    entity.rr = ((entity.rr || 0) + 1) % consumers.length;
    const order = consumers.slice(entity.rr).concat(consumers.slice(0, entity.rr));
    let progress = true;
    while (progress) {
      progress = false;
      for (const c of order) {
        if (this.credit(c) <= 0) continue;
        const msg = entity.nextFor(c);
        if (!msg) continue;
        this.deliver(c, msg);
        progress = true;
      }
    }
  }

  deliver(c, msg) {
    const ent = c.entity;
    if (c.mode === 'rnd') {
      ent.remove(msg);
      c.link.send(msg.encode(), uuidToDotNet(newUuid()), 0);
      return;
    }
    const now = Date.now();
    const until = c.sessionObj ? c.sessionObj.lockedUntil : now + ent.props.lockDurationMs;
    const lock = ent.lockMessage(msg, c, until);
    const d = c.link.send(msg.encode({ lockToken: lock.token, lockedUntil: until }), uuidToDotNet(lock.token), 0);
    d.sb = { msg, lockId: lock.id };
  }

  serveWaiting(entity) {
    for (const w of [...this.waiting]) {
      if (w.entity !== entity) continue;
      if (w.conn.sb && w.conn.sb.gone) {
        this.waiting.delete(w);
        continue;
      }
      const s = entity.nextSession();
      if (!s) return;
      this.waiting.delete(w);
      entity.lockSession(s.id, w.consumer);
      w.link.open();
      this.bindSession(w.consumer, s);
    }
  }

  // ---- dispositions from receivers (§5.1) ----

  onOutcome(type, delivery) {
    const info = delivery.sb;
    if (!info || info.done) return;
    info.done = true;
    const msg = info.msg;
    const ent = msg.entity;
    // The settlement frees a place in the session's outgoing buffer once
    // rhea has processed it: deliver what waited for it then.
    const link = delivery.link;
    setImmediate(() => this.guard(() => {
      if (link.sb && link.sb.consumer) this.pump(link.sb.consumer.entity);
    }));
    const valid = ent && msg.lock && msg.lock.id === info.lockId &&
      (msg.lock.until > Date.now() || ent.sessionLockHeld(msg));
    if (!valid) {
      settleOutgoing(delivery, rheaMessage.rejected({
        error: errorObj(COND.lockLost, 'The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.'),
      }).described());
      return;
    }
    const state = delivery.remote_state;
    try {
      switch (type) {
        case 'accepted':
          ent.complete(msg);
          settleOutgoing(delivery, rheaMessage.accepted().described());
          break;
        case 'released':
          ent.release(msg);
          settleOutgoing(delivery, rheaMessage.released().described());
          break;
        case 'modified': {
          // modified.message-annotations = properties to modify (§5.1)
          const annTyped = state && state.value ? state.value[2] : undefined;
          const props = annTyped && !isNullTyped(annTyped) ? typedMapEntries(annTyped).map(([k, v]) => [k, v]) : [];
          if (state && state.undeliverable_here) ent.defer(msg, props);
          else ent.abandon(msg, props);
          settleOutgoing(delivery, rheaMessage.modified({}).described());
          break;
        }
        case 'rejected': {
          const errTyped = state && state.value ? state.value[0] : undefined;
          let condition;
          let info2 = [];
          if (errTyped && !isNullTyped(errTyped) && Array.isArray(errTyped.value)) {
            condition = plain(errTyped.value[0]);
            const infoTyped = errTyped.value[2];
            if (infoTyped && !isNullTyped(infoTyped)) info2 = typedMapEntries(infoTyped).map(([k, v]) => [k, v]);
          }
          if (condition === COND.deadLetter) {
            const get = (k) => {
              const e = info2.find(([n]) => n === k);
              return e && !isNullTyped(e[1]) ? plain(e[1]) : undefined;
            };
            const props = info2.filter(([k]) => k !== 'DeadLetterReason' && k !== 'DeadLetterErrorDescription');
            ent.deadLetter(msg, get('DeadLetterReason'), get('DeadLetterErrorDescription'), props);
          } else {
            ent.abandon(msg, []);
          }
          // Dead-lettering is answered with a rejected state without an
          // error (go-amqp receiver.go comment on Service Bus behaviour).
          settleOutgoing(delivery, rheaMessage.rejected({}).described());
          break;
        }
        default:
      }
    } catch (e) {
      // The delivery is settled with the error; its lock is released.
      if (msg.entity && msg.lock && msg.lock.id === info.lockId) msg.entity.failedDelivery(msg);
      const err = e instanceof SbError ? errorObj(e.condition, e.description) : errorObj('amqp:internal-error', String(e));
      settleOutgoing(delivery, rheaMessage.rejected({ error: err }).described());
    }
  }

  // ---- incoming messages: sends, CBS, $management ----

  onMessage(ctx) {
    const link = ctx.receiver;
    const kind = link.sb && link.sb.kind;
    const raw = ctx.format ? ctx.message : ctx.message && ctx.message.__raw;
    if (kind === 'entity-in') return this.onSend(link, ctx.delivery, raw, ctx.format || 0);
    if (kind === 'cbs' || kind === 'mgmt') return this.onRequest(link, ctx.delivery, raw);
    ctx.delivery.reject(errorObj(COND.notAllowed, 'unexpected message'));
  }

  onSend(link, delivery, raw, format) {
    const r = link.sb.resolved;
    const conn = link.connection;
    const target = r.target;
    if (!conn.sb.claims.allows(r.path, 'Send')) {
      delivery.reject(errorObj(COND.unauthorized, `Unauthorized: 'Send' claim required for '${r.path}'.`));
      return;
    }
    const max = target.props.maxMessageSizeInKilobytes * 1024;
    if (raw.length > max) {
      delivery.reject(errorObj(COND.sizeExceeded,
        `The received message (size: ${raw.length} bytes) exceeds the limit (${max} bytes) currently allowed on the link.`));
      return;
    }
    let msgs;
    try {
      if (format === BATCH_FORMAT) {
        const env = parseMessage(raw);
        msgs = env.bodySections.filter((s) => s.code === SEC.data).map((s) => new StoredMessage(parseMessage(s.typed.value)));
      } else if (format === 0) {
        msgs = [new StoredMessage(parseMessage(raw))];
      } else {
        throw new SbError('amqp:not-implemented', `message-format ${format} is not supported`);
      }
      for (const m of msgs) target.validate(m);
    } catch (e) {
      const err = e instanceof SbError ? errorObj(e.condition, e.description)
        : errorObj('amqp:decode-error', String(e && e.message ? e.message : e));
      delivery.reject(err);
      return;
    }
    try {
      for (const m of msgs) target.send(m);
    } catch (e) {
      const err = e instanceof SbError ? errorObj(e.condition, e.description) : errorObj('amqp:internal-error', String(e));
      delivery.reject(err);
      return;
    }
    delivery.accept();
  }

  onRequest(link, delivery, raw) {
    const conn = link.connection;
    let req;
    try {
      req = parseMessage(raw);
    } catch (e) {
      delivery.reject(errorObj('amqp:decode-error', String(e.message)));
      return;
    }
    delivery.accept();
    const appProps = new Map(req.appProps.map(([k, v]) => [k, isNullTyped(v) ? undefined : plain(v)]));
    const replyTo = req.properties.reply_to;
    const correlation = req.propertiesTyped.message_id;
    const replyLink = conn.sb.replyLinks.get(replyTo);
    let status;
    let description;
    let body = null;
    let errorCondition;
    let cbs = false;
    if (link.sb.kind === 'cbs') {
      cbs = true;
      ({ status, description } = this.putToken(conn, appProps, req));
    } else {
      const valueSec = req.bodySections.find((s) => s.code === SEC.value);
      const res = this.mgmt.handle(conn, link.sb.resolved, appProps.get('operation'), appProps, valueSec ? valueSec.typed : null);
      ({ status, description, body, errorCondition } = res);
      this.log(`$management ${link.sb.resolved.path} ${appProps.get('operation')} -> ${status}${status >= 300 ? ' ' + description : ''}`);
    }
    if (!replyLink) {
      this.log(`no reply link for reply-to ${replyTo}`);
      return;
    }
    const props = {};
    if (correlation) props.correlation_id = correlation;
    const app = cbs
      ? [['status-code', tInt(status)], ['status-description', tString(description || '')]]
      : [['statusCode', tInt(status)], ['statusDescription', tString(description || '')]];
    if (errorCondition) app.push(['errorCondition', tSymbol(errorCondition)]);
    const parts = [
      encodeProperties(props),
      encodeMapSection(SEC.applicationProperties, app, false),
      encodeValueSection(body || tNull()),
    ];
    replyLink.send(Buffer.concat(parts), uuidToDotNet(newUuid()), 0);
  }

  // putToken verifies a CBS put-token (§3.1, §3.2).
  putToken(conn, appProps, req) {
    if (appProps.get('operation') !== 'put-token') {
      return { status: 400, description: `Unsupported $cbs operation '${appProps.get('operation')}'.` };
    }
    const type = appProps.get('type');
    const audience = appProps.get('name');
    const token = req.bodySections.length ? sectionPlain(req.bodySections[0].typed) : undefined;
    if (type !== SAS_TOKEN_TYPE) {
      return { status: 401, description: `Unsupported token type '${type}': this test server verifies SAS tokens only.` };
    }
    try {
      const claim = this.auth.verifySas(String(audience), token);
      conn.sb.claims.add(claim);
      this.log(`put-token ok: ${audience} (${claim.keyName}: ${claim.rights.join(',')})`);
      return { status: 200, description: 'OK' };
    } catch (e) {
      if (e instanceof AuthError) {
        this.log(`put-token refused: ${audience}: ${e.message}`);
        return { status: e.status, description: e.message };
      }
      throw e;
    }
  }

  // ---- periodic: token expiry, session-accept timeouts ----

  tick() {
    const now = Date.now();
    for (const conn of this.connections) {
      if (!conn.sb) continue;
      if (conn.sb.claims.dropExpired(now)) {
        for (const l of [...conn.sb.links]) {
          if (!l.path) continue;
          const okay = l.right ? conn.sb.claims.allows(l.path, l.right)
            : conn.sb.claims.allows(l.path, 'Listen') || conn.sb.claims.allows(l.path, 'Send');
          if (!okay) {
            // docs/wire-servicebus.md §3.1: when a token expires the links to the entity are dropped.
            conn.sb.links.delete(l);
            this.guard(() => l.link.close(errorObj(COND.unauthorized, `The token for '${l.path}' has expired.`)));
          }
        }
      }
    }
    for (const w of [...this.waiting]) {
      if (w.deadline <= now) {
        this.waiting.delete(w);
        w.link.state.open();
        w.link.local.attach.source = null;
        w.link.close(errorObj(COND.timeout, `No session is available on '${w.entity.path}' (timed out).`));
        w.link.connection._register();
      }
    }
  }
}
