// The message store: queues, topics with subscriptions, dead-letter
// sub-queues, locks, sessions, scheduling, TTL, duplicate detection.
// Section references (§) are to docs/wire-servicebus.md.
import {
  SEC, encodeHeader, encodeMapSection, EMPTY_PROPERTIES, newUuid, tLong, tInt, tString, tTimestamp, tUuid,
  messageIdKey, plain, isNullTyped, encodeProperties,
} from './codec.mjs';

export class SbError extends Error {
  // condition: AMQP error condition; status: $management status code.
  constructor(condition, description, status = 400) {
    super(description);
    this.condition = condition;
    this.description = description;
    this.status = status;
  }
}

export const COND = {
  notFound: 'amqp:not-found',
  notAllowed: 'amqp:not-allowed',
  unauthorized: 'amqp:unauthorized-access',
  sizeExceeded: 'amqp:link:message-size-exceeded',
  lockLost: 'com.microsoft:message-lock-lost',
  sessionLockLost: 'com.microsoft:session-lock-lost',
  sessionCannotBeLocked: 'com.microsoft:session-cannot-be-locked',
  messageNotFound: 'com.microsoft:message-not-found',
  argument: 'com.microsoft:argument-error',
  timeout: 'com.microsoft:timeout',
  deadLetter: 'com.microsoft:dead-letter',
};

// Annotations the broker owns: a value a client sends is replaced
// (the SDKs' live tests: "accepted but ignored - they'll be filled out when
// the broker sends the message").
const BROKER_ANNOTATIONS = new Set([
  'x-opt-locked-until', 'x-opt-sequence-number', 'x-opt-enqueued-time',
  'x-opt-enqueue-sequence-number', 'x-opt-message-state', 'x-opt-lock-token',
]);
const STATE_CODE = { active: 0, deferred: 1, scheduled: 2 };
const MAX_UINT = 0xffffffff;

let lockSeq = 0;

export class StoredMessage {
  constructor(parsed) {
    const h = parsed.header || {};
    this.durable = Boolean(h.durable);
    this.priority = h.priority ?? 4;
    this.sentTtlMs = h.ttl && h.ttl > 0 ? h.ttl : null;
    this.deliveryCount = 0;
    this.annotations = parsed.messageAnnotations.filter(([k]) => !BROKER_ANNOTATIONS.has(k)).map(([k, v]) => [k, v]);
    this.propertiesRaw = parsed.propertiesRaw;
    this.properties = parsed.properties;
    if (parsed.properties.message_id === undefined) {
      // The broker assigns a MessageId when the sender set none (the REST
      // peek-lock example of docs/wire-servicebus.md §7 returns one the sender
      // did not set; the JS SDK's lock renewal is keyed on it).
      const id = newUuid().toString('hex');
      parsed.propertiesTyped.message_id = tString(id);
      this.properties = { ...parsed.properties, message_id: id };
      this.propertiesRaw = encodeProperties(parsed.propertiesTyped);
    }
    this.appProps = parsed.appProps.map(([k, v]) => [k, v]);
    this.bodyRaw = Buffer.concat(parsed.bodyRaw);
    this.footerRaw = parsed.footerRaw;
    this.sessionId = typeof parsed.properties.group_id === 'string' ? parsed.properties.group_id : undefined;
    this.messageId = parsed.properties.message_id;
    this.state = 'active';
    this.seq = 0;
    this.enqueuedSeq = 0;
    this.enqueuedTime = 0;
    this.ttlMs = null;
    this.expiresAt = null;
    this.lock = null;
    this.deadLetterSource = undefined;
    this.entity = null;
  }

  annotation(name) {
    const e = this.annotations.find(([k]) => k === name);
    return e ? e[1] : undefined;
  }

  scheduledEnqueueTime() {
    const t = this.annotation('x-opt-scheduled-enqueue-time');
    if (t === undefined || isNullTyped(t)) return null;
    const v = plain(t);
    if (v instanceof Date) return v.getTime();
    if (typeof v === 'number') return v;
    return null;
  }

  partitionKey() {
    const t = this.annotation('x-opt-partition-key');
    return t === undefined || isNullTyped(t) ? undefined : plain(t);
  }

  clone() {
    const c = Object.create(StoredMessage.prototype);
    Object.assign(c, this);
    c.annotations = this.annotations.slice();
    c.appProps = this.appProps.slice();
    c.lock = null;
    c.entity = null;
    return c;
  }

  setAppProp(name, typed) {
    const i = this.appProps.findIndex(([k]) => k === name);
    if (i >= 0) this.appProps[i] = [name, typed];
    else this.appProps.push([name, typed]);
  }

  // encode renders the message for a receiver, a peek, or a
  // receive-by-sequence-number reply (§1 table, §5.4).
  encode({ lockToken, lockedUntil } = {}) {
    const parts = [];
    const ttl = this.ttlMs !== null && this.ttlMs <= MAX_UINT ? this.ttlMs : null;
    parts.push(encodeHeader({
      durable: this.durable,
      priority: this.priority,
      ttl,
      firstAcquirer: this.deliveryCount === 0,
      deliveryCount: this.deliveryCount,
    }));
    if (lockToken) {
      parts.push(encodeMapSection(SEC.deliveryAnnotations, [['x-opt-lock-token', tUuid(lockToken)]], true));
    }
    const ann = this.annotations.filter(([k]) => k !== 'x-opt-deadletter-source' || this.deadLetterSource === undefined);
    ann.push(['x-opt-enqueued-time', tTimestamp(this.enqueuedTime)]);
    ann.push(['x-opt-sequence-number', tLong(this.seq)]);
    ann.push(['x-opt-enqueue-sequence-number', tLong(this.enqueuedSeq)]);
    if (lockedUntil !== undefined) ann.push(['x-opt-locked-until', tTimestamp(lockedUntil)]);
    ann.push(['x-opt-message-state', tInt(STATE_CODE[this.state] ?? 0)]);
    if (this.deadLetterSource !== undefined) ann.push(['x-opt-deadletter-source', tString(this.deadLetterSource)]);
    parts.push(encodeMapSection(SEC.messageAnnotations, ann, true));
    parts.push(this.propertiesRaw || EMPTY_PROPERTIES);
    if (this.appProps.length) parts.push(encodeMapSection(SEC.applicationProperties, this.appProps, false));
    parts.push(this.bodyRaw);
    if (this.footerRaw) parts.push(this.footerRaw);
    return Buffer.concat(parts);
  }
}

function minTtl(...vals) {
  const v = vals.filter((x) => x !== null && x !== undefined && x > 0);
  return v.length ? Math.min(...v) : null;
}

// Receivable: a queue, a subscription or a dead-letter sub-queue.
export class Receivable {
  constructor(ns, kind, name, path, props, parent) {
    this.ns = ns;
    this.kind = kind; // 'queue' | 'subscription' | 'dlq'
    this.name = name;
    this.path = path; // display path, e.g. "orders" or "t/Subscriptions/s"
    this.props = props;
    this.parent = parent || null;
    this.messages = new Map(); // seq -> StoredMessage, in enqueue order
    this.locks = new Map(); // lock token hex -> StoredMessage
    this.sessions = new Map(); // session id -> {id, state, owner, lockedUntil}
    this.consumers = new Set(); // transport-side consumer objects
    this.dlq = null;
    this.transferDlq = null;
    // The management API's CreatedAt: a server started again makes its
    // entities anew (numbered from 1 again), with a later time.
    this.createdAt = new Date().toISOString();
  }

  get requiresSession() {
    return this.kind !== 'dlq' && this.props.requiresSession;
  }

  notify() {
    this.ns.notify(this);
  }

  enqueue(msg) {
    msg.entity = this;
    this.messages.set(msg.seq, msg);
    if (this.requiresSession && msg.sessionId !== undefined) this.session(msg.sessionId);
    this.notify();
  }

  isExpired(msg, now) {
    return this.kind !== 'dlq' && msg.expiresAt !== null && msg.expiresAt <= now && !msg.lock;
  }

  // expireDue applies TTL (§6.4): dead-letter with TTLExpiredException when
  // the entity says so, otherwise drop. Locked messages are left alone.
  expireDue(now = Date.now()) {
    for (const msg of [...this.messages.values()]) {
      if (this.isExpired(msg, now)) this.expire(msg);
    }
  }

  expire(msg) {
    if (this.props.deadLetteringOnMessageExpiration) {
      this.deadLetter(msg, 'TTLExpiredException', 'The message expired and was dead lettered.', [], { system: true });
    } else {
      this.remove(msg);
      this.ns.log(`expired ${this.path} seq=${msg.seq} (dropped)`);
    }
  }

  isAvailable(msg, now) {
    return msg.state === 'active' && !msg.lock && !this.isExpired(msg, now);
  }

  // nextFor picks the next message for a consumer: the lowest sequence
  // number available (for a session consumer: of its session).
  nextFor(consumer, now = Date.now()) {
    for (const msg of this.messages.values()) {
      if (this.isExpired(msg, now)) {
        this.expire(msg);
        continue;
      }
      if (!this.isAvailable(msg, now)) continue;
      if (this.requiresSession) {
        if (consumer.sessionId === undefined || msg.sessionId !== consumer.sessionId) continue;
      }
      return msg;
    }
    return null;
  }

  lockMessage(msg, owner, until) {
    const token = newUuid();
    const hex = token.toString('hex');
    msg.lock = { token, hex, until, owner, id: ++lockSeq };
    this.locks.set(hex, msg);
    return msg.lock;
  }

  unlock(msg) {
    if (msg.lock) {
      this.locks.delete(msg.lock.hex);
      msg.lock = null;
    }
  }

  remove(msg) {
    this.unlock(msg);
    this.messages.delete(msg.seq);
    msg.entity = null;
  }

  findLocked(tokenBuf) {
    const hex = Buffer.from(tokenBuf).toString('hex');
    const msg = this.locks.get(hex);
    if (!msg) return null;
    if (msg.lock.until <= Date.now() && !this.sessionLockHeld(msg)) return null;
    return msg;
  }

  sessionLockHeld(msg) {
    if (!this.requiresSession || msg.sessionId === undefined) return false;
    const s = this.sessions.get(msg.sessionId);
    return Boolean(s && s.owner && msg.lock && msg.lock.owner === s.owner && s.lockedUntil > Date.now());
  }

  applyProps(msg, props) {
    for (const [k, v] of props || []) msg.setAppProp(k, v);
  }

  complete(msg) {
    this.remove(msg);
  }

  // failedDelivery counts a delivery that did not complete (abandon, lock
  // expiry, session lock loss) and dead-letters at MaxDeliveryCount. The
  // dead-letter queue keeps the count unchanged (the Go SDK's live test
  // TestMessageSettlementUsingReceiver expects DeliveryCount 2 after an
  // abandon in the DLQ).
  failedDelivery(msg) {
    this.unlock(msg);
    if (this.kind === 'dlq') {
      this.notify();
      return;
    }
    msg.deliveryCount++;
    if (msg.deliveryCount >= this.props.maxDeliveryCount) {
      this.deadLetter(
        msg,
        'MaxDeliveryCountExceeded',
        `Message could not be consumed after ${this.props.maxDeliveryCount} delivery attempts.`,
        [],
        { system: true },
      );
      return;
    }
    this.notify();
  }

  abandon(msg, props) {
    this.applyProps(msg, props);
    this.failedDelivery(msg);
  }

  // release hands a message back without counting a delivery: Service Bus
  // does not increment DeliveryCount on the AMQP released outcome
  // (docs/wire-servicebus.md §5.1). The Go SDK releases what reaches a
  // peek-lock receiver between two ReceiveMessages calls.
  release(msg) {
    this.unlock(msg);
    this.notify();
  }

  defer(msg, props) {
    this.applyProps(msg, props);
    this.unlock(msg);
    msg.state = 'deferred';
  }

  // deadLetter moves a message to <entity>/$DeadLetterQueue with
  // DeadLetterReason / DeadLetterErrorDescription as application properties
  // and x-opt-deadletter-source (§1, §5.1).
  deadLetter(msg, reason, description, props, { system = false } = {}) {
    if (this.kind === 'dlq') {
      throw new SbError(COND.notAllowed, 'A message in a dead-letter queue cannot be dead-lettered again.', 400);
    }
    this.applyProps(msg, props);
    this.remove(msg);
    msg.state = 'active';
    if (reason !== undefined && reason !== null) msg.setAppProp('DeadLetterReason', tString(String(reason)));
    if (description !== undefined && description !== null) {
      msg.setAppProp('DeadLetterErrorDescription', tString(String(description)));
    }
    msg.deadLetterSource = this.path;
    this.dlq.enqueue(msg);
    this.ns.log(`dead-lettered ${this.path} seq=${msg.seq} reason=${reason}${system ? ' (system)' : ''}`);
  }

  // ---- sessions (§4) ----

  session(id) {
    let s = this.sessions.get(id);
    if (!s) {
      s = { id, state: null, owner: null, lockedUntil: 0, updated: Date.now() };
      this.sessions.set(id, s);
    }
    return s;
  }

  sessionFree(s, now) {
    return !s.owner || s.lockedUntil <= now;
  }

  lockSession(id, owner, now = Date.now()) {
    const s = this.session(id);
    if (!this.sessionFree(s, now) && s.owner !== owner) {
      throw new SbError(
        COND.sessionCannotBeLocked,
        `The requested session '${id}' cannot be accepted. It may be locked by another receiver.`,
        410,
      );
    }
    if (s.owner && s.owner !== owner) this.releaseSession(s, s.owner);
    s.owner = owner;
    s.lockedUntil = now + this.props.lockDurationMs;
    return s;
  }

  // nextSession: an unlocked session with an available message, the one
  // holding the oldest such message first.
  nextSession(now = Date.now()) {
    for (const msg of this.messages.values()) {
      if (msg.sessionId === undefined || !this.isAvailable(msg, now)) continue;
      const s = this.session(msg.sessionId);
      if (this.sessionFree(s, now)) return s;
    }
    return null;
  }

  releaseSession(s, owner) {
    if (s.owner !== owner) return;
    s.owner = null;
    s.lockedUntil = 0;
    for (const msg of [...this.locks.values()]) {
      if (msg.sessionId === s.id && msg.lock.owner === owner) this.failedDelivery(msg);
    }
    this.notify();
  }

  renewSession(id, owner) {
    const s = this.sessions.get(id);
    const now = Date.now();
    if (!s || !s.owner || s.lockedUntil <= now || (owner && s.owner !== owner)) {
      throw new SbError(COND.sessionLockLost, `The session lock for '${id}' was lost.`, 410);
    }
    s.lockedUntil = now + this.props.lockDurationMs;
    for (const msg of this.locks.values()) {
      if (msg.sessionId === id) msg.lock.until = s.lockedUntil;
    }
    return s.lockedUntil;
  }

  // ---- periodic work ----

  tick(now) {
    for (const msg of [...this.locks.values()]) {
      if (!msg.lock || msg.lock.until > now) continue;
      if (this.requiresSession && msg.sessionId !== undefined) continue; // session lock governs
      this.ns.log(`lock expired ${this.path} seq=${msg.seq}`);
      this.failedDelivery(msg);
    }
    for (const s of this.sessions.values()) {
      if (s.owner && s.lockedUntil <= now) {
        const owner = s.owner;
        this.ns.log(`session lock expired ${this.path} session=${s.id}`);
        this.releaseSession(s, owner);
        if (owner.sessionLockLost) owner.sessionLockLost(s.id);
      }
    }
    this.expireDue(now);
  }

  peek(from, count, sessionId) {
    this.expireDue();
    let list = [...this.messages.values()];
    if (this.kind === 'queue') list = list.concat([...this.parent.scheduled.values()]);
    list = list.filter((m) => m.seq >= from && (sessionId === undefined || m.sessionId === sessionId));
    list.sort((a, b) => a.seq - b.seq);
    return list.slice(0, count);
  }
}

// SendTarget: a queue or a topic, which accepts sends, schedules and
// detects duplicates.
class SendTarget {
  constructor(ns, name, props) {
    this.ns = ns;
    this.name = name;
    this.props = props;
    this.nextSeq = 1;
    this.scheduled = new Map(); // seq -> StoredMessage
    this.dedup = new Map(); // message id key -> time
  }

  allocSeq() {
    return this.nextSeq++;
  }

  receivables() {
    return [];
  }

  validate(msg) {
    const pk = msg.partitionKey();
    if (msg.sessionId !== undefined && pk !== undefined && pk !== msg.sessionId) {
      throw new SbError(
        COND.argument,
        `The SessionId '${msg.sessionId}' and PartitionKey '${pk}' must be the same (docs/wire-servicebus.md §6.5).`,
      );
    }
    const sched = msg.annotation('x-opt-scheduled-enqueue-time');
    if (sched !== undefined && (isNullTyped(sched) || !(plain(sched) instanceof Date))) {
      throw new SbError(COND.argument, 'x-opt-scheduled-enqueue-time must be a timestamp.');
    }
  }

  // isDuplicate records the message id and reports a duplicate within the
  // window (§6.2: accepted and silently dropped).
  isDuplicate(msg, now) {
    if (!this.props.requiresDuplicateDetection) return false;
    const key = messageIdKey(msg.messageId);
    if (key === null) return false;
    const seen = this.dedup.get(key);
    if (seen !== undefined && now - seen < this.props.duplicateDetectionHistoryTimeWindowMs) return true;
    this.dedup.set(key, now);
    return false;
  }

  // send accepts one message: duplicate check, schedule or enqueue.
  send(msg, now = Date.now()) {
    this.validate(msg);
    if (this.isDuplicate(msg, now)) {
      this.ns.log(`duplicate dropped ${this.name} message-id=${String(msg.messageId)}`);
      return { duplicate: true };
    }
    const at = msg.scheduledEnqueueTime();
    if (at !== null && at > now) return { scheduled: this.schedule(msg, at) };
    this.enqueueNow(msg, now);
    return { seq: msg.seq };
  }

  schedule(msg, at) {
    msg.seq = this.allocSeq();
    msg.state = 'scheduled';
    msg.scheduledAt = at;
    msg.enqueuedTime = Date.now();
    msg.entity = null;
    this.scheduled.set(msg.seq, msg);
    this.ns.log(`scheduled ${this.name} seq=${msg.seq} at ${new Date(at).toISOString()}`);
    return msg.seq;
  }

  cancelScheduled(seq) {
    if (!this.scheduled.delete(seq)) {
      throw new SbError(COND.messageNotFound, `No scheduled message with sequence number ${seq}.`, 404);
    }
  }

  // activation enqueues a scheduled message anew with a new sequence
  // number (§6.1).
  tick(now) {
    for (const [seq, msg] of [...this.scheduled]) {
      if (msg.scheduledAt <= now) {
        this.scheduled.delete(seq);
        msg.state = 'active';
        this.enqueueNow(msg, now);
      }
    }
    for (const [k, t] of this.dedup) {
      if (now - t >= this.props.duplicateDetectionHistoryTimeWindowMs) this.dedup.delete(k);
    }
  }

  placeIn(target, msg, now, extraDefaultTtl) {
    msg.ttlMs = minTtl(msg.sentTtlMs, this.props.defaultMessageTimeToLiveMs, extraDefaultTtl);
    msg.expiresAt = msg.ttlMs === null ? null : msg.enqueuedTime + msg.ttlMs;
    if (target.requiresSession && msg.sessionId === undefined) {
      // docs/wire-servicebus.md [DLQ]: a message without a session id forwarded into a session
      // subscription is dead-lettered with "Session id is null.".
      target.messages.set(msg.seq, msg);
      msg.entity = target;
      target.deadLetter(msg, 'Session id is null.', 'Session id is null.', [], { system: true });
      return;
    }
    target.enqueue(msg);
  }
}

export class Queue extends SendTarget {
  constructor(ns, cfg) {
    super(ns, cfg.name, cfg);
    this.rules = new Map(cfg.authorizationRules.map((r) => [r.name, r]));
    this.scopePath = cfg.name.toLowerCase();
    this.entity = new Receivable(ns, 'queue', cfg.name, cfg.name, cfg, this);
    this.entity.dlq = new Receivable(ns, 'dlq', cfg.name, `${cfg.name}/$DeadLetterQueue`, cfg, this.entity);
    this.entity.transferDlq = new Receivable(ns, 'dlq', cfg.name, `${cfg.name}/$Transfer/$DeadLetterQueue`, cfg, this.entity);
  }

  validate(msg) {
    super.validate(msg);
    if (this.props.requiresSession && msg.sessionId === undefined) {
      throw new SbError(
        COND.argument,
        `The queue '${this.name}' requires sessions: the message must have a SessionId (properties.group-id).`,
      );
    }
  }

  receivables() {
    return [this.entity, this.entity.dlq, this.entity.transferDlq];
  }

  enqueueNow(msg, now) {
    msg.seq = this.allocSeq();
    msg.enqueuedSeq = msg.seq;
    msg.enqueuedTime = now;
    this.placeIn(this.entity, msg, now, null);
  }
}

export class Topic extends SendTarget {
  constructor(ns, cfg) {
    super(ns, cfg.name, cfg);
    this.rules = new Map(cfg.authorizationRules.map((r) => [r.name, r]));
    this.scopePath = cfg.name.toLowerCase();
    this.subscriptions = new Map();
    for (const s of cfg.subscriptions) {
      const path = `${cfg.name}/Subscriptions/${s.name}`;
      const sub = new Receivable(ns, 'subscription', s.name, path, s, this);
      sub.dlq = new Receivable(ns, 'dlq', s.name, `${path}/$DeadLetterQueue`, s, sub);
      sub.transferDlq = new Receivable(ns, 'dlq', s.name, `${path}/$Transfer/$DeadLetterQueue`, s, sub);
      this.subscriptions.set(s.name.toLowerCase(), sub);
    }
  }

  receivables() {
    return [...this.subscriptions.values()].flatMap((s) => [s, s.dlq, s.transferDlq]);
  }

  // A topic copies each message to every subscription: only the default
  // TrueFilter rule exists here (no SQL / correlation filters).
  enqueueNow(msg, now) {
    msg.seq = this.allocSeq();
    msg.enqueuedSeq = msg.seq;
    msg.enqueuedTime = now;
    for (const sub of this.subscriptions.values()) {
      this.placeIn(sub, msg.clone(), now, sub.props.defaultMessageTimeToLiveMs);
    }
  }
}

export class Namespace {
  constructor(cfg, { log } = {}) {
    this.cfg = cfg;
    this.log = log || (() => {});
    this.rules = new Map(cfg.rules.map((r) => [r.name, r]));
    this.hosts = cfg.hosts;
    this.queues = new Map();
    this.topics = new Map();
    for (const q of cfg.queues) this.queues.set(q.name.toLowerCase(), new Queue(this, q));
    for (const t of cfg.topics) this.topics.set(t.name.toLowerCase(), new Topic(this, t));
    this.listeners = new Set();
    this.pending = new Set();
    this.timer = setInterval(() => this.tick(), 100);
    this.timer.unref?.();
  }

  close() {
    clearInterval(this.timer);
  }

  onAvailable(fn) {
    this.listeners.add(fn);
  }

  notify(entity) {
    if (this.pending.size === 0) {
      setImmediate(() => {
        const list = [...this.pending];
        this.pending.clear();
        for (const e of list) for (const fn of this.listeners) fn(e);
      });
    }
    this.pending.add(entity);
  }

  scopes() {
    return [...this.queues.values(), ...this.topics.values()];
  }

  entityScopeForPath(path) {
    const first = path.split('/')[0];
    return this.queues.get(first) || this.topics.get(first) || null;
  }

  // resolve maps a link address to what it names (§0 addressing):
  //   <queue>, <topic>, <topic>/Subscriptions/<sub>, any of those with
  //   /$DeadLetterQueue or /$Transfer/$DeadLetterQueue, and /$management.
  resolve(address) {
    if (typeof address !== 'string' || address === '') return null;
    let a = address.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]+\//i, '').replace(/^\/+/, '').replace(/\/+$/, '');
    let mgmt = false;
    if (/\/\$management$/i.test(a)) {
      mgmt = true;
      a = a.replace(/\/\$management$/i, '');
    }
    const parts = a.split('/');
    const lower = parts.map((p) => p.toLowerCase());
    let sub = null;
    let rest;
    // authPath: what a CBS claim must cover (a claim on the entity covers
    // its $management node; the JS SDK claims the $management node alone).
    const base = { mgmt, path: lower.join('/'), authPath: lower.join('/') + (mgmt ? '/$management' : '') };
    if (this.queues.has(lower[0])) {
      const q = this.queues.get(lower[0]);
      rest = lower.slice(1);
      if (rest.length === 0) return { ...base, kind: 'queue', target: q, entity: q.entity };
      sub = q.entity;
    } else if (this.topics.has(lower[0])) {
      const t = this.topics.get(lower[0]);
      if (lower.length === 1) return { ...base, kind: 'topic', target: t, entity: null };
      if (lower[1] !== 'subscriptions' || lower.length < 3) return null;
      sub = t.subscriptions.get(lower[2]);
      if (!sub) return null;
      rest = lower.slice(3);
      if (rest.length === 0) return { ...base, kind: 'subscription', target: null, entity: sub };
    } else {
      return null;
    }
    if (rest.length === 1 && rest[0] === '$deadletterqueue') {
      return { ...base, kind: 'dlq', target: null, entity: sub.dlq };
    }
    if (rest.length === 2 && rest[0] === '$transfer' && rest[1] === '$deadletterqueue') {
      return { ...base, kind: 'dlq', target: null, entity: sub.transferDlq };
    }
    return null;
  }

  allReceivables() {
    return this.scopes().flatMap((t) => t.receivables());
  }

  tick() {
    const now = Date.now();
    try {
      for (const t of this.scopes()) t.tick(now);
      for (const e of this.allReceivables()) e.tick(now);
    } catch (e) {
      this.log('tick error: ' + (e && e.stack ? e.stack : e));
    }
  }
}

