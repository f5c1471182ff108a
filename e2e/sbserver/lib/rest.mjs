// HTTP REST data plane (docs/wire-servicebus.md §7) over the same
// store as AMQP: send (single and batch), peek-lock, receive-and-delete,
// and delete / unlock / renew on the lock URL. Plain HTTP on 127.0.0.1.
import http from 'node:http';
import {
  SEC, types, encodeProperties, encodeMapSection, encodeHeader, described, parseMessage, sectionPlain,
  tString, tSymbol, tTimestamp, tLong, uuidString, uuidFromString, plain,
} from './codec.mjs';
import { SbError, COND, StoredMessage } from './store.mjs';
import { AuthError } from './auth.mjs';

// Request headers that are HTTP's own (or the REST protocol's), never
// custom properties (docs/wire-servicebus.md §7: restricted headers are excluded).
const RESERVED = new Set([
  'accept', 'accept-charset', 'accept-encoding', 'accept-language', 'authorization', 'brokerproperties',
  'cache-control', 'connection', 'content-encoding', 'content-language', 'content-length', 'content-location',
  'content-md5', 'content-range', 'content-type', 'cookie', 'date', 'expect', 'from', 'host', 'if-match',
  'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since', 'keep-alive', 'max-forwards', 'pragma',
  'proxy-authorization', 'proxy-connection', 'range', 'referer', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'user-agent', 'via', 'warning', 'origin',
]);

const DAYS = 'Sun|Mon|Tue|Wed|Thu|Fri|Sat';
const MONTHS = 'Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec';
const RFC1123 = new RegExp(`^(${DAYS}), \\d{2} (${MONTHS}) \\d{4} \\d{2}:\\d{2}:\\d{2} GMT$`);

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function parseRfc1123(s, what) {
  if (typeof s !== 'string' || !RFC1123.test(s)) throw new HttpError(400, `${what}: not an RFC 1123 date: ${JSON.stringify(s)}`);
  return Date.parse(s);
}

export function rfc1123(ms) {
  return new Date(ms).toUTCString();
}

// inferProperty implements docs/wire-servicebus.md §7's type inference of a custom-property
// header value: quoted RFC date -> DateTime, quoted -> string; unquoted
// true/false -> bool, integer -> Int64, float -> Double, else rejected.
export function inferProperty(name, value) {
  const v = value.trim();
  if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) {
    const inner = v.slice(1, -1);
    if (RFC1123.test(inner)) return tTimestamp(Date.parse(inner));
    return tString(inner);
  }
  if (v === 'true') return types.True();
  if (v === 'false') return types.False();
  if (/^[+-]?\d+$/.test(v)) {
    const b = BigInt(v);
    if (b >= -(2n ** 63n) && b < 2n ** 63n) return tLong(b);
    throw new HttpError(400, `custom property '${name}': integer out of Int64 range`);
  }
  if (/^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$/.test(v) && Number.isFinite(Number(v))) return types.Double(Number(v));
  throw new HttpError(400, `custom property '${name}': cannot infer a type for ${JSON.stringify(value)} (quote strings)`);
}

// renderProperty renders an application property as a response header.
function renderProperty(t) {
  const v = plain(t);
  const name = t && t.type ? t.type.name : '';
  if (v === null || v === undefined) return undefined;
  if (v instanceof Date) return `"${rfc1123(v.getTime())}"`;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (name === 'Uuid' && Buffer.isBuffer(v)) return `"${uuidString(v)}"`;
  if (typeof v === 'number') return String(v);
  if (Buffer.isBuffer(v) && (name === 'Long' || name === 'Ulong')) {
    return (name === 'Long' ? v.readBigInt64BE() : v.readBigUInt64BE()).toString();
  }
  // docs/wire-servicebus.md §7: a quoted header is a string with the quotes stripped, nothing
  // else unescaped (inferProperty), so render the inverse: the text in
  // quotes. JSON escaping only for text a header cannot carry as is.
  if (typeof v === 'string') return /^[\t\x20-\x7e]*$/.test(v) ? `"${v}"` : JSON.stringify(v);
  return undefined; // binary, lists, maps, described: not representable
}

function ttlMsFrom(bp) {
  if (bp.TimeToLive !== undefined) {
    const s = Number(bp.TimeToLive);
    if (!Number.isFinite(s) || s <= 0) throw new HttpError(400, 'BrokerProperties.TimeToLive must be a positive number of seconds');
    return Math.round(s * 1000);
  }
  if (bp.TimeToLiveTimeSpan !== undefined) {
    const m = /^(?:(\d+)\.)?(\d+):(\d+):(\d+(?:\.\d+)?)$/.exec(String(bp.TimeToLiveTimeSpan));
    if (!m) throw new HttpError(400, 'BrokerProperties.TimeToLiveTimeSpan must be d.hh:mm:ss');
    return Math.round((((Number(m[1] || 0) * 24 + Number(m[2])) * 60 + Number(m[3])) * 60 + Number(m[4])) * 1000);
  }
  return null;
}

// buildMessage encodes a REST message as AMQP so both protocols share
// one representation.
export function buildMessage(body, contentType, bp, userProps) {
  if (bp === null || typeof bp !== 'object' || Array.isArray(bp)) throw new HttpError(400, 'BrokerProperties must be a JSON object');
  const str = (k) => {
    const v = bp[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw new HttpError(400, `BrokerProperties.${k} must be a string`);
    return v;
  };
  const sessionId = str('SessionId');
  const partitionKey = str('PartitionKey');
  if (sessionId !== undefined && partitionKey !== undefined && sessionId !== partitionKey) {
    throw new HttpError(400, 'BrokerProperties: SessionId and PartitionKey must be equal when both are set');
  }
  const props = {};
  const set = (field, v, wrap = tString) => {
    if (v !== undefined) props[field] = wrap(v);
  };
  set('message_id', str('MessageId'));
  set('to', str('To'));
  set('subject', str('Label'));
  set('reply_to', str('ReplyTo'));
  set('correlation_id', str('CorrelationId'));
  set('content_type', contentType || undefined, tSymbol);
  set('group_id', sessionId);
  set('reply_to_group_id', str('ReplyToSessionId'));
  const ann = [];
  if (partitionKey !== undefined) ann.push(['x-opt-partition-key', tString(partitionKey)]);
  if (bp.ScheduledEnqueueTimeUtc !== undefined) {
    ann.push(['x-opt-scheduled-enqueue-time', tTimestamp(parseRfc1123(bp.ScheduledEnqueueTimeUtc, 'ScheduledEnqueueTimeUtc'))]);
  }
  const ttl = ttlMsFrom(bp);
  const parts = [encodeHeader({ durable: true, ttl: ttl === null ? null : Math.min(ttl, 0xffffffff) })];
  if (ann.length) parts.push(encodeMapSection(SEC.messageAnnotations, ann, true));
  parts.push(encodeProperties(props));
  if (userProps.length) parts.push(encodeMapSection(SEC.applicationProperties, userProps, false));
  const w = new types.Writer();
  w.write(described(SEC.data, types.wrap_binary(body)));
  parts.push(w.toBuffer());
  return Buffer.concat(parts);
}

function bodyBytes(msg) {
  const p = parseMessage(msg.bodyRaw);
  const out = [];
  for (const s of p.bodySections) {
    if (s.code === SEC.data) out.push(Buffer.from(s.typed.value));
    else {
      const v = sectionPlain(s.typed);
      if (Buffer.isBuffer(v)) out.push(v);
      else if (typeof v === 'string') out.push(Buffer.from(v, 'utf8'));
      else out.push(Buffer.from(JSON.stringify(v), 'utf8'));
    }
  }
  return Buffer.concat(out);
}

function brokerProperties(msg, lock) {
  const p = msg.properties;
  const bp = {};
  if (typeof p.correlation_id === 'string') bp.CorrelationId = p.correlation_id;
  if (msg.sessionId !== undefined) bp.SessionId = msg.sessionId;
  bp.DeliveryCount = msg.deliveryCount + 1;
  bp.EnqueuedSequenceNumber = msg.enqueuedSeq;
  bp.EnqueuedTimeUtc = rfc1123(msg.enqueuedTime);
  if (typeof p.subject === 'string') bp.Label = p.subject;
  if (lock) {
    bp.LockToken = uuidString(lock.token);
    bp.LockedUntilUtc = rfc1123(lock.until);
  }
  if (p.message_id !== undefined) bp.MessageId = Buffer.isBuffer(p.message_id) ? uuidString(p.message_id) : String(p.message_id);
  const pk = msg.partitionKey();
  if (typeof pk === 'string') bp.PartitionKey = pk;
  if (typeof p.reply_to === 'string') bp.ReplyTo = p.reply_to;
  if (typeof p.reply_to_group_id === 'string') bp.ReplyToSessionId = p.reply_to_group_id;
  const sched = msg.scheduledEnqueueTime();
  if (sched !== null) bp.ScheduledEnqueueTimeUtc = rfc1123(sched);
  bp.SequenceNumber = msg.seq;
  bp.State = { active: 'Active', deferred: 'Deferred', scheduled: 'Scheduled' }[msg.state] || 'Active';
  if (msg.ttlMs !== null) bp.TimeToLive = msg.ttlMs / 1000;
  if (typeof p.to === 'string') bp.To = p.to;
  if (msg.deadLetterSource !== undefined) bp.DeadLetterSource = msg.deadLetterSource;
  return bp;
}

export class RestServer {
  constructor(ns, auth) {
    this.ns = ns;
    this.auth = auth;
    this.log = ns.log;
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e) => {
        const status = e instanceof HttpError ? e.status : e instanceof AuthError ? 401 : e instanceof SbError ? this.sbStatus(e) : 500;
        if (status === 500) this.log(`REST internal error: ${e && e.stack ? e.stack : e}`);
        if (!res.headersSent) {
          const headers = { 'Content-Type': 'text/plain; charset=utf-8' };
          // A refusal before the whole request body was read (too large)
          // ends the connection: the rest of the body would otherwise be
          // taken for the next request, and a client that kept the
          // connection would have its next request reset.
          if (!req.complete) headers.Connection = 'close';
          res.writeHead(status, headers);
          res.end(String(e && e.message ? e.message : e));
        } else {
          res.destroy();
        }
      });
    });
  }

  sbStatus(e) {
    if (e.condition === COND.sizeExceeded) return 403;
    if (e.condition === COND.notFound) return 410;
    return 400;
  }

  listen(port, host = '127.0.0.1') {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve(this.server.address().port));
    });
  }

  close() {
    this.server.close();
    this.server.closeAllConnections?.();
  }

  authorize(req, entityPath, right) {
    const h = req.headers.authorization;
    if (!h) throw new HttpError(401, 'MissingToken: the Authorization header is required');
    const audience = `http://${req.headers.host || '127.0.0.1'}/${entityPath}`;
    const claim = this.auth.verifySas(audience, h);
    const ok = claim.rights.includes(right) || claim.rights.includes('Manage');
    if (!ok) throw new HttpError(401, `Unauthorized: '${right}' claim required for '${entityPath}'`);
  }

  async readBody(req, max) {
    const chunks = [];
    let n = 0;
    for await (const c of req) {
      n += c.length;
      if (n > max) throw new HttpError(403, `The message is larger than the ${max} bytes allowed`);
      chunks.push(c);
    }
    return Buffer.concat(chunks);
  }

  async handle(req, res) {
    const url = new URL(req.url, 'http://127.0.0.1');
    const segs = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    const mi = segs.findIndex((s) => s.toLowerCase() === 'messages');
    if (mi < 0 && req.method === 'GET' && segs.length > 0) return this.atomGet(req, res, segs);
    if (mi < 1) throw new HttpError(404, 'Not found: expected {entity}/messages');
    const entityAddr = segs.slice(0, mi).join('/');
    const rest = segs.slice(mi + 1);
    const r = this.ns.resolve(entityAddr);
    if (!r || r.mgmt) throw new HttpError(410, `The messaging entity '${entityAddr}' does not exist`);
    const timeout = Math.min(Number(url.searchParams.get('timeout') ?? 60), 300);
    if (rest.length === 0 && req.method === 'POST') return this.send(req, res, r);
    if (rest.length === 1 && rest[0].toLowerCase() === 'head' && (req.method === 'POST' || req.method === 'DELETE')) {
      return this.receive(req, res, r, req.method === 'POST', timeout);
    }
    if (rest.length === 2 && ['DELETE', 'PUT', 'POST'].includes(req.method)) return this.onLock(req, res, r, rest[0], rest[1]);
    throw new HttpError(405, `${req.method} ${url.pathname} is not a Service Bus REST operation`);
  }

  // atomGet answers GET {queue} and GET {topic}/Subscriptions/{sub} of the
  // management API with the entity's description and its CountDetails, as
  // the admin clients' Get*RuntimeProperties read them
  // (https://learn.microsoft.com/en-us/rest/api/servicebus/get-entity and
  // https://learn.microsoft.com/en-us/azure/service-bus-messaging/message-counters).
  // Only the counters, times, RequiresDuplicateDetection, RequiresSession
  // and MaxMessageSizeInKilobytes (the queue's size limit, which a sink
  // encodes for): the rest of the description is not kept.
  atomGet(req, res, segs) {
    const path = segs.join('/');
    this.authorize(req, path, 'Manage');
    const r = this.ns.resolve(path);
    if (!r || r.mgmt || (r.kind !== 'queue' && r.kind !== 'subscription')) {
      // The service answers an unknown entity with an empty feed.
      res.writeHead(200, { 'Content-Type': 'application/atom+xml;type=feed;charset=utf-8' });
      res.end(`<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title><id>${xmlEscape(`http://${req.headers.host}/${path}`)}</id></feed>`);
      return;
    }
    const e = r.entity;
    e.expireDue();
    let active = 0;
    for (const m of e.messages.values()) if (m.state === 'active') active++;
    const scheduled = r.kind === 'queue' ? r.target.scheduled.size : 0;
    const counts = {
      ActiveMessageCount: active,
      DeadLetterMessageCount: e.dlq ? e.dlq.messages.size : 0,
      ScheduledMessageCount: scheduled,
      TransferMessageCount: 0,
      TransferDeadLetterMessageCount: e.transferDlq ? e.transferDlq.messages.size : 0,
    };
    const total = e.messages.size + scheduled + counts.DeadLetterMessageCount + counts.TransferDeadLetterMessageCount;
    const desc = r.kind === 'queue' ? 'QueueDescription' : 'SubscriptionDescription';
    const now = new Date().toISOString();
    const cd = Object.entries(counts).map(([k, v]) => `<d2p1:${k}>${v}</d2p1:${k}>`).join('');
    const title = r.kind === 'queue' ? e.name : segs[segs.length - 1];
    res.writeHead(200, { 'Content-Type': 'application/atom+xml;type=entry;charset=utf-8' });
    res.end(
      `<entry xmlns="http://www.w3.org/2005/Atom"><id>${xmlEscape(`http://${req.headers.host}/${path}`)}</id>` +
        `<title type="text">${xmlEscape(title)}</title><updated>${now}</updated>` +
        `<content type="application/xml"><${desc} xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
        `<RequiresDuplicateDetection>${Boolean(e.props.requiresDuplicateDetection)}</RequiresDuplicateDetection>` +
        `<RequiresSession>${Boolean(e.props.requiresSession)}</RequiresSession>` +
        (e.props.maxMessageSizeInKilobytes ? `<MaxMessageSizeInKilobytes>${Number(e.props.maxMessageSizeInKilobytes)}</MaxMessageSizeInKilobytes>` : '') +
        `<MessageCount>${total}</MessageCount>` +
        `<CreatedAt>${e.createdAt}</CreatedAt><UpdatedAt>${now}</UpdatedAt><AccessedAt>${now}</AccessedAt>` +
        `<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus">${cd}</CountDetails>` +
        `</${desc}></content></entry>`,
    );
  }

  userProps(req) {
    const out = [];
    const raw = req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i];
      const lower = name.toLowerCase();
      if (RESERVED.has(lower) || lower.startsWith('x-ms-') || lower.startsWith('sec-')) continue;
      out.push([name, inferProperty(name, raw[i + 1])]);
    }
    return out;
  }

  async send(req, res, r) {
    if (!r.target) throw new HttpError(400, `Cannot send to '${r.path}'`);
    this.authorize(req, r.path, 'Send');
    const max = r.target.props.maxMessageSizeInKilobytes * 1024;
    const body = await this.readBody(req, max);
    const ct = req.headers['content-type'];
    let encoded;
    if (ct && ct.split(';')[0].trim().toLowerCase() === 'application/vnd.microsoft.servicebus.json') {
      let arr;
      try {
        arr = JSON.parse(body.toString('utf8'));
      } catch (e) {
        throw new HttpError(400, `batch body is not JSON: ${e.message}`);
      }
      if (!Array.isArray(arr)) throw new HttpError(400, 'batch body must be a JSON array');
      encoded = arr.map((item, i) => {
        if (!item || typeof item.Body !== 'string') throw new HttpError(400, `batch[${i}].Body must be a string`);
        const up = Object.entries(item.UserProperties || {}).map(([k, v]) => {
          if (typeof v === 'string') return [k, tString(v)];
          if (typeof v === 'boolean') return [k, v ? types.True() : types.False()];
          if (typeof v === 'number' && Number.isInteger(v)) return [k, tLong(v)];
          if (typeof v === 'number') return [k, types.Double(v)];
          throw new HttpError(400, `batch[${i}].UserProperties.${k}: unsupported value`);
        });
        return buildMessage(Buffer.from(item.Body, 'utf8'), undefined, item.BrokerProperties || {}, up);
      });
    } else {
      let bp = {};
      if (req.headers.brokerproperties) {
        try {
          bp = JSON.parse(req.headers.brokerproperties);
        } catch (e) {
          throw new HttpError(400, `BrokerProperties is not JSON: ${e.message}`);
        }
      }
      encoded = [buildMessage(body, ct, bp, this.userProps(req))];
    }
    const msgs = encoded.map((b) => new StoredMessage(parseMessage(b)));
    for (const m of msgs) r.target.validate(m);
    for (const m of msgs) r.target.send(m);
    res.writeHead(201, { 'Content-Length': '0' });
    res.end();
  }

  async receive(req, res, r, peekLock, timeoutS) {
    const ent = r.entity;
    if (!ent) throw new HttpError(400, `Cannot receive from '${r.path}'`);
    if (ent.requiresSession) throw new HttpError(400, `'${r.path}' requires sessions: session receivers are not available over REST (§7)`);
    this.authorize(req, r.path, 'Listen');
    const deadline = Date.now() + timeoutS * 1000;
    const consumer = { sessionId: undefined };
    // A client that went away (a cancelled long poll) must not be handed a
    // message: locked for nobody, it would come back only when its lock
    // expires, one delivery count later. Asked again after every wait, as
    // the client may leave during it; the peer's FIN ends the socket's
    // readable side (an HTTP/1.1 client does not half-close while it waits
    // for its response).
    const gone = () => req.socket.destroyed || req.socket.readableEnded;
    // A request read together with its client's close (a long poll the
    // client cancelled while this server was busy, read only after a
    // message arrived) must take nothing either: libuv reads the close
    // (EOF) one loop turn after the request's bytes, so look after two.
    await new Promise((ok) => setImmediate(() => setImmediate(ok)));
    let msg = gone() ? null : ent.nextFor(consumer);
    while (!msg && Date.now() < deadline && !gone()) {
      await new Promise((ok) => setTimeout(ok, 50));
      if (!gone()) msg = ent.nextFor(consumer);
    }
    if (!msg) {
      res.writeHead(204, { 'Content-Length': '0' });
      res.end();
      return;
    }
    let lock = null;
    if (peekLock) {
      lock = ent.lockMessage(msg, { conn: null, link: { name: 'rest' } }, Date.now() + ent.props.lockDurationMs);
    } else {
      ent.remove(msg);
    }
    const headers = {
      BrokerProperties: JSON.stringify(brokerProperties(msg, lock)),
      'Content-Type': typeof msg.properties.content_type === 'string' ? msg.properties.content_type : 'application/octet-stream',
      Date: rfc1123(msg.enqueuedTime),
    };
    if (lock) {
      const host = req.headers.host || '127.0.0.1';
      const id = msg.properties.message_id !== undefined && typeof msg.properties.message_id === 'string'
        ? encodeURIComponent(msg.properties.message_id) : String(msg.seq);
      headers.Location = `http://${host}/${r.path.split('/').map(encodeURIComponent).join('/')}/messages/${id}/${uuidString(lock.token)}`;
    }
    for (const [k, t] of msg.appProps) {
      const v = renderProperty(t);
      if (v !== undefined && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k)) headers[k] = v;
    }
    const body = bodyBytes(msg);
    headers['Content-Length'] = String(body.length);
    res.writeHead(peekLock ? 201 : 200, headers);
    res.end(body);
  }

  async onLock(req, res, r, idOrSeq, tokenStr) {
    const ent = r.entity;
    if (!ent) throw new HttpError(400, `'${r.path}' has no locks`);
    this.authorize(req, r.path, 'Listen');
    const token = uuidFromString(tokenStr);
    const msg = token ? ent.findLocked(token) : null;
    const matches = msg && (String(msg.seq) === idOrSeq || String(msg.properties.message_id) === idOrSeq);
    if (!matches) throw new HttpError(404, 'No message with that id and lock token is locked (the lock expired or the message was settled)');
    if (req.method === 'DELETE') ent.complete(msg);
    else if (req.method === 'PUT') ent.abandon(msg, []);
    else msg.lock.until = Date.now() + ent.props.lockDurationMs; // POST = renew
    res.writeHead(200, { 'Content-Length': '0' });
    res.end();
  }
}

function xmlEscape(s) {
  return String(s).replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]);
}
