// AMQP 1.0 message codec for the Service Bus test server.
//
// Messages are kept as their sections, with every value as a rhea "Typed"
// value (type + value), so that what a client sent is re-encoded with the
// same AMQP types (an int8 stays an int8, a symbol stays a symbol, a
// described value stays described). Only the header and the broker-owned
// message annotations are rewritten on delivery.
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';

const require = createRequire(import.meta.url);
export const types = require('rhea/lib/types.js');
export const rheaMessage = require('rhea/lib/message.js');

// rhea 3.0.5 reads a long or ulong as a JavaScript number unless its high
// word is beyond 2^21, and then as its 8 bytes. Its bound is one off: a
// high word of exactly 2^21 (values from 2^53, the last a double holds
// exactly, up to 2^53 + 2^32) is read as a number, and rounded. Read such
// values as their 8 bytes too, which rhea's writer copies back verbatim,
// so that a client's long comes back as it sent it.
for (const code of [0x80, 0x81]) {
  const desc = types.by_code[code];
  const read = desc.read;
  desc.read = (buffer, offset) => {
    const v = read(buffer, offset);
    return typeof v === 'number' && !Number.isSafeInteger(v) ? buffer.slice(offset, offset + 8) : v;
  };
}

export const SEC = {
  header: 0x70,
  deliveryAnnotations: 0x71,
  messageAnnotations: 0x72,
  properties: 0x73,
  applicationProperties: 0x74,
  data: 0x75,
  sequence: 0x76,
  value: 0x77,
  footer: 0x78,
};
const SYMBOLIC = {
  'amqp:header:list': 0x70,
  'amqp:delivery-annotations:map': 0x71,
  'amqp:message-annotations:map': 0x72,
  'amqp:properties:list': 0x73,
  'amqp:application-properties:map': 0x74,
  'amqp:data:binary': 0x75,
  'amqp:amqp-sequence:list': 0x76,
  'amqp:value:*': 0x77,
  'amqp:footer:map': 0x78,
};

export const PROPERTY_FIELDS = [
  'message_id', 'user_id', 'to', 'subject', 'reply_to', 'correlation_id', 'content_type',
  'content_encoding', 'absolute_expiry_time', 'creation_time', 'group_id', 'group_sequence',
  'reply_to_group_id',
];

export const BATCH_FORMAT = 0x80013700;

function descriptorCode(d) {
  if (!d) return undefined;
  const v = d.value;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return SYMBOLIC[v];
  return undefined;
}

export class CodecError extends Error {}

// unwrapTyped converts a Typed value to a plain JS value (strings, numbers,
// Buffers, Dates, arrays, objects for maps). Described values stay Typed.
export function plain(t) {
  return types.unwrap(t, true);
}

// sectionPlain unwraps the value of a described body section.
export function sectionPlain(section) {
  const c = Object.create(Object.getPrototypeOf(section));
  Object.assign(c, section);
  delete c.descriptor;
  return plain(c);
}

// typedMapEntries turns a Typed map into [[keyString, valueTyped], ...].
export function typedMapEntries(t) {
  if (!t || !t.type || !types.is_map(t)) return [];
  const out = [];
  const items = t.value;
  for (let i = 0; i + 1 < items.length; i += 2) {
    const k = plain(items[i]);
    out.push([typeof k === 'string' ? k : String(k), items[i + 1], items[i]]);
  }
  return out;
}

export function isNullTyped(t) {
  return t === undefined || t === null || (t.type && t.type.name === 'Null');
}

// parseMessage splits an encoded AMQP message into its sections.
export function parseMessage(buf) {
  const reader = new types.Reader(buf);
  const m = {
    header: null,
    deliveryAnnotations: [],
    messageAnnotations: [],
    propertiesRaw: null,
    properties: {},
    propertiesTyped: {},
    appProps: [], // [name, Typed]
    bodyRaw: [],
    bodySections: [], // [{code, typed}]
    footerRaw: null,
  };
  while (reader.remaining() > 0) {
    const start = reader.position;
    let s;
    try {
      s = reader.read();
    } catch (e) {
      throw new CodecError('malformed message section: ' + e.message);
    }
    const raw = buf.subarray(start, reader.position);
    const code = descriptorCode(s.descriptor);
    switch (code) {
      case SEC.header: {
        const f = (s.value || []).map(plain);
        m.header = {
          durable: f[0] ?? false,
          priority: f[1] ?? 4,
          ttl: f[2] ?? null,
          firstAcquirer: f[3] ?? false,
          deliveryCount: f[4] ?? 0,
        };
        break;
      }
      case SEC.deliveryAnnotations:
        m.deliveryAnnotations = typedMapEntries(s);
        break;
      case SEC.messageAnnotations:
        m.messageAnnotations = typedMapEntries(s);
        break;
      case SEC.properties: {
        m.propertiesRaw = raw;
        const f = s.value || [];
        PROPERTY_FIELDS.forEach((name, i) => {
          if (i < f.length && !isNullTyped(f[i])) {
            m.propertiesTyped[name] = f[i];
            m.properties[name] = plain(f[i]);
          }
        });
        break;
      }
      case SEC.applicationProperties:
        m.appProps = typedMapEntries(s).map(([k, v]) => [k, v]);
        break;
      case SEC.data:
      case SEC.sequence:
      case SEC.value:
        m.bodyRaw.push(raw);
        m.bodySections.push({ code, typed: s });
        break;
      case SEC.footer:
        m.footerRaw = raw;
        break;
      default:
        throw new CodecError('unknown message section descriptor ' + String(s.descriptor && s.descriptor.value));
    }
  }
  return m;
}

function write(typed) {
  const w = new types.Writer();
  w.write(typed);
  return w.toBuffer();
}

export function described(code, typed) {
  return types.described(types.wrap_ulong(code), typed);
}

export function mapTyped(entries, symbolicKeys) {
  const items = [];
  for (const [k, v] of entries) {
    items.push(symbolicKeys ? types.wrap_symbol(k) : types.wrap_string(k));
    items.push(v === undefined || v === null ? types.Null() : v);
  }
  return types.Map32(items);
}

export function encodeHeader(h) {
  const fields = [
    h.durable ? types.True() : null,
    h.priority !== undefined && h.priority !== null && h.priority !== 4 ? types.Ubyte(h.priority) : null,
    h.ttl !== undefined && h.ttl !== null ? types.Uint(h.ttl) : null,
    h.firstAcquirer ? types.True() : null,
    // delivery-count is always written: the JS SDK reads deliveryCount
    // only when the header carries it.
    types.wrap_uint(h.deliveryCount || 0),
  ];
  while (fields.length && fields[fields.length - 1] === null) fields.pop();
  return write(described(SEC.header, types.List32(fields.map((f) => f ?? types.Null()))));
}

export function encodeMapSection(code, entries, symbolicKeys) {
  return write(described(code, mapTyped(entries, symbolicKeys)));
}

export const EMPTY_PROPERTIES = write(described(SEC.properties, types.List0()));

// encodeProperties builds a properties section from typed fields.
export function encodeProperties(typedFields) {
  const list = PROPERTY_FIELDS.map((n) => typedFields[n] ?? null);
  while (list.length && list[list.length - 1] === null) list.pop();
  return write(described(SEC.properties, list.length ? types.List32(list.map((f) => f ?? types.Null())) : types.List0()));
}

export function encodeValueSection(typed) {
  return write(described(SEC.value, typed));
}

// ---- typed value helpers ----

export function tLong(v) {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(v));
  return types.Long(b);
}
export function tInt(v) { return types.Int(v); }
export function tUint(v) { return types.Uint(v); }
export function tString(s) { return types.wrap_string(s); }
export function tSymbol(s) { return types.wrap_symbol(s); }
export function tTimestamp(ms) { return types.Timestamp(Math.floor(ms)); }
export function tUuid(buf) { return types.Uuid(Buffer.from(buf)); }
export function tBinary(buf) { return types.wrap_binary(Buffer.from(buf)); }
export function tBool(b) { return b ? types.True() : types.False(); }
export function tNull() { return types.Null(); }
export function tList(items) { return items.length ? types.List32(items) : types.List0(); }
export function tArray(items, typecode) { return types.Array32(items, typecode); }
export function tStringMap(obj) {
  return mapTyped(Object.entries(obj).filter(([, v]) => v !== undefined), false);
}

// Long values from rhea come back as numbers when small and as 8-byte
// Buffers otherwise.
export function toBigInt(v) {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return BigInt(Math.trunc(v));
  if (Buffer.isBuffer(v) && v.length === 8) return v.readBigInt64BE();
  if (v && v.value !== undefined) return toBigInt(v.value);
  throw new CodecError('not an integer: ' + String(v));
}
export function toNumber(v) {
  return Number(toBigInt(v));
}

// ---- lock tokens and ticks ----

export function newUuid() {
  const b = randomBytes(16);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  return b;
}

// uuidToDotNet turns an RFC 4122 byte order uuid into the .NET Guid byte
// order used in delivery tags (docs/wire-servicebus.md §5.4); the swap is its own
// inverse.
export function uuidToDotNet(b) {
  const o = Buffer.from(b);
  [o[0], o[1], o[2], o[3]] = [b[3], b[2], b[1], b[0]];
  [o[4], o[5]] = [b[5], b[4]];
  [o[6], o[7]] = [b[7], b[6]];
  return o;
}

export function uuidString(b) {
  const h = Buffer.from(b).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function uuidFromString(s) {
  const h = String(s).replace(/[{}-]/g, '');
  if (!/^[0-9a-fA-F]{32}$/.test(h)) return null;
  return Buffer.from(h, 'hex');
}

export const EPOCH_TICKS = 621355968000000000n;
export function msToTicks(ms) {
  return BigInt(Math.floor(ms)) * 10000n + EPOCH_TICKS;
}

// messageIdKey gives the duplicate-detection key of a message-id value of
// any AMQP message-id type.
export function messageIdKey(v) {
  if (v === undefined || v === null) return null;
  if (Buffer.isBuffer(v)) return 'b:' + v.toString('hex');
  return 's:' + String(v);
}
