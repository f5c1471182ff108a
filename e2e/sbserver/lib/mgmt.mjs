// $management request/response operations (docs/wire-servicebus.md §4).
import {
  types, parseMessage, typedMapEntries, plain, isNullTyped, tArray, tTimestamp, tUuid, tBinary, tNull, tList,
  toNumber, mapTyped,
} from './codec.mjs';
import { SbError, COND, StoredMessage } from './store.mjs';

export class OpResult {
  constructor(status, description, body, errorCondition) {
    this.status = status;
    this.description = description;
    this.body = body; // Typed map or null
    this.errorCondition = errorCondition;
  }
}

const ok = (body) => new OpResult(200, 'OK', body || mapTyped([], false));
const noContent = () => new OpResult(204, 'No Content', mapTyped([], false));

function fromError(e) {
  if (e instanceof SbError) return new OpResult(e.status || 400, e.description, null, e.condition);
  return new OpResult(500, String(e && e.message ? e.message : e), null, 'amqp:internal-error');
}

class Body {
  constructor(typed) {
    this.entries = new Map(typedMapEntries(typed).map(([k, v]) => [k, v]));
  }
  has(k) {
    return this.entries.has(k) && !isNullTyped(this.entries.get(k));
  }
  typed(k) {
    return this.entries.get(k);
  }
  get(k) {
    const t = this.entries.get(k);
    return t === undefined || isNullTyped(t) ? undefined : plain(t);
  }
  need(k) {
    const v = this.get(k);
    if (v === undefined) throw new SbError(COND.argument, `The request body has no '${k}'.`, 400);
    return v;
  }
  list(k) {
    const v = this.need(k);
    if (!Array.isArray(v)) throw new SbError(COND.argument, `'${k}' must be an array or list.`, 400);
    return v;
  }
  mapEntries(k) {
    const t = this.entries.get(k);
    if (t === undefined || isNullTyped(t)) return [];
    return typedMapEntries(t).map(([key, v]) => [key, v]);
  }
}

function lockTokens(body) {
  return body.list('lock-tokens').map((t) => {
    if (!Buffer.isBuffer(t) || t.length !== 16) throw new SbError(COND.argument, 'lock-tokens must hold uuids.', 400);
    return t;
  });
}

function seqList(body, k) {
  return body.list(k).map((v) => toNumber(v));
}

// Management runs the operations against one resolved entity.
export class Management {
  constructor(ns, transport) {
    this.ns = ns;
    this.transport = transport;
  }

  // handle returns an OpResult for a decoded request.
  handle(conn, resolved, operation, appProps, bodyTyped) {
    const body = new Body(bodyTyped);
    const assoc = appProps.get('associated-link-name');
    const right = operation === 'com.microsoft:schedule-message' || operation === 'com.microsoft:cancel-scheduled-message'
      ? 'Send' : 'Listen';
    if (!conn.sb.claims.allows(resolved.authPath, right)) {
      return new OpResult(401, `Unauthorized: '${right}' claim required for '${resolved.authPath}'.`, null, COND.unauthorized);
    }
    try {
      switch (operation) {
        case 'com.microsoft:renew-lock': return this.renewLock(resolved, body);
        case 'com.microsoft:renew-session-lock': return this.renewSessionLock(conn, resolved, body, assoc);
        case 'com.microsoft:get-session-state': return this.getSessionState(conn, resolved, body, assoc);
        case 'com.microsoft:set-session-state': return this.setSessionState(conn, resolved, body, assoc);
        case 'com.microsoft:peek-message': return this.peek(resolved, body);
        case 'com.microsoft:receive-by-sequence-number': return this.receiveBySeq(conn, resolved, body);
        case 'com.microsoft:update-disposition': return this.updateDisposition(resolved, body);
        case 'com.microsoft:schedule-message': return this.schedule(resolved, body);
        case 'com.microsoft:cancel-scheduled-message': return this.cancel(resolved, body);
        case 'com.microsoft:get-message-sessions': return this.getSessions(resolved, body);
        default:
          return new OpResult(501, `The operation '${operation}' is not implemented by this test server.`, null, 'amqp:not-implemented');
      }
    } catch (e) {
      return fromError(e);
    }
  }

  entity(resolved) {
    if (!resolved.entity) throw new SbError(COND.notAllowed, `'${resolved.path}' cannot receive messages.`, 400);
    return resolved.entity;
  }

  renewLock(resolved, body) {
    const ent = this.entity(resolved);
    const now = Date.now();
    const out = [];
    for (const tok of lockTokens(body)) {
      const msg = ent.findLocked(tok);
      if (!msg) throw new SbError(COND.lockLost, 'The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.', 410);
      if (ent.requiresSession && msg.sessionId !== undefined) {
        out.push(msg.lock.until);
      } else {
        msg.lock.until = now + ent.props.lockDurationMs;
        out.push(msg.lock.until);
      }
    }
    return ok(mapTyped([['expirations', tArray(out.map((t) => new Date(t)), 0x83)]], false));
  }

  sessionOwnedBy(conn, ent, id, assoc) {
    const s = ent.sessions.get(id);
    const now = Date.now();
    if (!s || !s.owner || s.lockedUntil <= now) {
      throw new SbError(COND.sessionLockLost, `The session lock for session '${id}' has expired or was lost.`, 410);
    }
    if (assoc && (s.owner.conn !== conn || s.owner.link.name !== assoc)) {
      throw new SbError(COND.sessionLockLost, `Session '${id}' is not locked by link '${assoc}'.`, 410);
    }
    return s;
  }

  sessionId(body) {
    const id = body.get('session-id');
    if (typeof id !== 'string') throw new SbError(COND.argument, 'session-id must be a string.', 400);
    return id;
  }

  renewSessionLock(conn, resolved, body, assoc) {
    const ent = this.entity(resolved);
    const id = this.sessionId(body);
    const s = this.sessionOwnedBy(conn, ent, id, assoc);
    const until = ent.renewSession(id, s.owner);
    return ok(mapTyped([['expiration', tTimestamp(until)]], false));
  }

  getSessionState(conn, resolved, body, assoc) {
    const ent = this.entity(resolved);
    const s = this.sessionOwnedBy(conn, ent, this.sessionId(body), assoc);
    return ok(mapTyped([['session-state', s.state ? tBinary(s.state) : tNull()]], false));
  }

  setSessionState(conn, resolved, body, assoc) {
    const ent = this.entity(resolved);
    const s = this.sessionOwnedBy(conn, ent, this.sessionId(body), assoc);
    const st = body.get('session-state');
    if (st !== undefined && !Buffer.isBuffer(st)) throw new SbError(COND.argument, 'session-state must be binary.', 400);
    // An empty state clears it: the Go SDK clears with SetSessionState(nil),
    // sent as a zero-length binary, and its live test expects nil back.
    s.state = st === undefined || st.length === 0 ? null : Buffer.from(st);
    s.updated = Date.now();
    return ok();
  }

  peek(resolved, body) {
    const ent = this.entity(resolved);
    const from = body.has('from-sequence-number') ? toNumber(body.get('from-sequence-number')) : 0;
    const count = body.has('message-count') ? toNumber(body.get('message-count')) : 1;
    const sid = body.get('session-id');
    const msgs = ent.peek(from, Math.max(0, count), typeof sid === 'string' ? sid : undefined);
    if (!msgs.length) return noContent();
    const list = msgs.map((m) => {
      const lockedUntil = m.lock ? m.lock.until : undefined;
      return mapTyped([['message', tBinary(m.encode({ lockedUntil }))]], false);
    });
    return ok(mapTyped([['messages', tList(list)]], false));
  }

  receiveBySeq(conn, resolved, body) {
    const ent = this.entity(resolved);
    const seqs = seqList(body, 'sequence-numbers');
    const mode = body.has('receiver-settle-mode') ? toNumber(body.get('receiver-settle-mode')) : 1;
    const sid = body.get('session-id');
    const now = Date.now();
    const found = [];
    for (const seq of seqs) {
      const msg = ent.messages.get(seq);
      if (!msg || msg.state !== 'deferred' || (msg.lock && msg.lock.until > now) ||
        (typeof sid === 'string' && msg.sessionId !== sid)) {
        throw new SbError(COND.messageNotFound, `No deferred message with sequence number ${seq} is available.`, 404);
      }
      found.push(msg);
    }
    const owner = { conn, link: { name: '$management' } };
    const list = found.map((msg) => {
      if (mode === 0) {
        ent.remove(msg);
        return mapTyped([['message', tBinary(msg.encode())]], false);
      }
      ent.unlock(msg);
      const lock = ent.lockMessage(msg, owner, now + ent.props.lockDurationMs);
      return mapTyped([
        ['message', tBinary(msg.encode({ lockToken: lock.token, lockedUntil: lock.until }))],
        ['lock-token', tUuid(lock.token)],
      ], false);
    });
    return ok(mapTyped([['messages', tList(list)]], false));
  }

  updateDisposition(resolved, body) {
    const ent = this.entity(resolved);
    const status = body.need('disposition-status');
    const tokens = lockTokens(body);
    const props = body.mapEntries('properties-to-modify');
    const msgs = tokens.map((tok) => {
      const msg = ent.findLocked(tok);
      if (!msg) throw new SbError(COND.lockLost, 'The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.', 410);
      return msg;
    });
    for (const msg of msgs) {
      switch (status) {
        case 'completed': ent.complete(msg); break;
        case 'abandoned': ent.abandon(msg, props); break;
        case 'defered': ent.defer(msg, props); break; // sic, §4.4
        case 'suspended':
          ent.deadLetter(msg, body.get('deadletter-reason'), body.get('deadletter-description'), props);
          break;
        default:
          throw new SbError(COND.argument, `Unknown disposition-status '${status}'.`, 400);
      }
    }
    return ok();
  }

  target(resolved) {
    if (!resolved.target) throw new SbError(COND.notAllowed, `Cannot schedule messages on '${resolved.path}'.`, 400);
    return resolved.target;
  }

  schedule(resolved, body) {
    const target = this.target(resolved);
    const entries = body.list('messages');
    const parsed = entries.map((e, i) => {
      const raw = e && e.message;
      if (!Buffer.isBuffer(raw)) throw new SbError(COND.argument, `messages[${i}].message must be binary.`, 400);
      if (raw.length > target.props.maxMessageSizeInKilobytes * 1024) {
        throw new SbError(COND.sizeExceeded, `messages[${i}] is larger than ${target.props.maxMessageSizeInKilobytes} KB.`, 400);
      }
      const msg = new StoredMessage(parseMessage(raw));
      const at = msg.scheduledEnqueueTime();
      if (at === null) throw new SbError(COND.argument, `messages[${i}] has no x-opt-scheduled-enqueue-time.`, 400);
      target.validate(msg);
      return { msg, at };
    });
    const seqs = [];
    const now = Date.now();
    for (const { msg, at } of parsed) {
      if (target.isDuplicate(msg, now)) {
        seqs.push(0);
        continue;
      }
      seqs.push(target.schedule(msg, at));
    }
    return ok(mapTyped([['sequence-numbers', tArray(seqs, 0x81)]], false));
  }

  cancel(resolved, body) {
    const target = this.target(resolved);
    for (const seq of seqList(body, 'sequence-numbers')) target.cancelScheduled(seq);
    return ok();
  }

  getSessions(resolved, body) {
    const ent = this.entity(resolved);
    if (!ent.requiresSession) throw new SbError(COND.notAllowed, `'${resolved.path}' is not session-enabled.`, 400);
    const skip = body.has('skip') ? toNumber(body.get('skip')) : 0;
    const top = body.has('top') ? toNumber(body.get('top')) : 100;
    const ids = [];
    for (const s of ent.sessions.values()) {
      const hasMsg = [...ent.messages.values()].some((m) => m.sessionId === s.id);
      if (hasMsg || s.state) ids.push(s.id);
    }
    const page = ids.slice(skip, skip + top);
    if (!page.length) return noContent();
    return ok(mapTyped([
      ['skip', types.Int(skip + page.length)],
      ['sessions-ids', tArray(page, 0xb1)],
    ], false));
  }
}

