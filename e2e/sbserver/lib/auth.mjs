// Shared Access Signature verification and per-connection claims
// (docs/wire-servicebus.md §3: CBS put-token, SAS format and signing, rights).
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SAS_TOKEN_TYPE = 'servicebus.windows.net:sastoken';
const SCHEMES = new Set(['sb:', 'amqp:', 'amqps:', 'http:', 'https:']);

export class AuthError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// splitResource parses "scheme://host[:port]/path" into a lower-cased host
// (without port) and a normalised entity path ("" = the whole namespace).
export function splitResource(uri) {
  let u;
  try {
    u = new URL(uri);
  } catch {
    throw new AuthError(401, `InvalidSignature: the resource '${uri}' is not a URI`);
  }
  if (!SCHEMES.has(u.protocol)) {
    throw new AuthError(401, `InvalidSignature: unsupported scheme in resource '${uri}'`);
  }
  let path = decodeURIComponent(u.pathname || '/');
  path = path.replace(/^\/+/, '').replace(/\/+$/, '').toLowerCase();
  return { host: u.hostname.toLowerCase(), path };
}

export function pathCovers(claimPath, entityPath) {
  const e = entityPath.toLowerCase();
  return claimPath === '' || e === claimPath || e.startsWith(claimPath + '/');
}

function parseToken(token) {
  const prefix = 'SharedAccessSignature ';
  if (typeof token !== 'string' || !token.startsWith(prefix)) {
    throw new AuthError(401, 'InvalidSignature: the token is not a SharedAccessSignature');
  }
  const fields = {};
  for (const part of token.slice(prefix.length).split('&')) {
    const i = part.indexOf('=');
    if (i <= 0) throw new AuthError(401, 'InvalidSignature: malformed token field');
    fields[part.slice(0, i)] = part.slice(i + 1); // still URL-encoded
  }
  for (const k of ['sr', 'sig', 'se', 'skn']) {
    if (!fields[k]) throw new AuthError(401, `InvalidSignature: the token has no '${k}'`);
  }
  return fields;
}

// signature computes base64(HMAC-SHA256(key string bytes, sr + "\n" + se))
// over sr exactly as it appears in the token (docs/wire-servicebus.md §3.2).
export function signature(key, srEncoded, se) {
  return createHmac('sha256', Buffer.from(key, 'utf8')).update(srEncoded + '\n' + se).digest('base64');
}

// makeToken builds a SAS token the way the SDKs do (lower-cased, query-escaped
// resource); used by tests and the REST side.
export function makeToken(resource, keyName, key, expirySeconds) {
  const sr = encodeURIComponent(resource.toLowerCase());
  const sig = encodeURIComponent(signature(key, sr, String(expirySeconds)));
  return `SharedAccessSignature sr=${sr}&sig=${sig}&se=${expirySeconds}&skn=${keyName}`;
}

export class Authenticator {
  constructor(ns) {
    this.ns = ns;
  }

  // findRule looks a key name up among the namespace rules, then among the
  // rules of the entity the path names.
  findRule(keyName, entityPath) {
    const nsRule = this.ns.rules.get(keyName);
    if (nsRule) return { rule: nsRule, scope: '' };
    const ent = this.ns.entityScopeForPath(entityPath);
    if (ent && ent.rules && ent.rules.get(keyName)) {
      return { rule: ent.rules.get(keyName), scope: ent.scopePath };
    }
    return null;
  }

  hostAllowed(host) {
    return this.ns.hosts.size === 0 || this.ns.hosts.has(host);
  }

  // verifySas checks a put-token: returns {path, rights, expiresAt}.
  verifySas(audience, token, now = Date.now()) {
    const aud = splitResource(audience);
    if (!this.hostAllowed(aud.host)) {
      throw new AuthError(401, `InvalidAudience: '${aud.host}' is not this namespace`);
    }
    const f = parseToken(token);
    const se = Number(f.se);
    if (!Number.isInteger(se)) throw new AuthError(401, 'InvalidSignature: se is not an integer');
    if (se * 1000 <= now) {
      throw new AuthError(401, `ExpiredToken: the token expired at ${new Date(se * 1000).toISOString()}`);
    }
    let srDecoded;
    try {
      srDecoded = decodeURIComponent(f.sr);
    } catch {
      throw new AuthError(401, 'InvalidSignature: sr is not URL-encoded');
    }
    const sr = splitResource(srDecoded);
    if (!this.hostAllowed(sr.host)) {
      throw new AuthError(401, `InvalidSignature: the token's resource host '${sr.host}' is not this namespace`);
    }
    if (!pathCovers(sr.path, aud.path)) {
      throw new AuthError(401, `InvalidAudience: the token for '${srDecoded}' does not cover '${audience}'`);
    }
    const keyName = decodeURIComponent(f.skn);
    const found = this.findRule(keyName, aud.path);
    if (!found) throw new AuthError(401, `InvalidSignature: unknown SharedAccessKeyName '${keyName}'`);
    if (!pathCovers(found.scope, sr.path)) {
      throw new AuthError(401, `InvalidSignature: rule '${keyName}' does not apply to '${srDecoded}'`);
    }
    let given;
    try {
      given = Buffer.from(decodeURIComponent(f.sig), 'base64');
    } catch {
      throw new AuthError(401, 'InvalidSignature: sig is not URL-encoded');
    }
    const want = Buffer.from(signature(found.rule.key, f.sr, f.se), 'base64');
    const want2 = found.rule.secondaryKey ? Buffer.from(signature(found.rule.secondaryKey, f.sr, f.se), 'base64') : null;
    const ok = (w) => w && w.length === given.length && timingSafeEqual(w, given);
    if (!ok(want) && !ok(want2)) {
      throw new AuthError(401, 'InvalidSignature: the token has an invalid signature');
    }
    return { path: aud.path, rights: found.rule.rights, expiresAt: se * 1000, keyName };
  }

  // verifyPlain checks SASL PLAIN: user = rule name, password = key.
  verifyPlain(user, password) {
    const rule = this.ns.rules.get(user);
    if (rule && (password === rule.key || (rule.secondaryKey && password === rule.secondaryKey))) {
      return { path: '', rights: rule.rights, expiresAt: Infinity, keyName: user };
    }
    for (const ent of this.ns.scopes()) {
      const r = ent.rules && ent.rules.get(user);
      if (r && (password === r.key || (r.secondaryKey && password === r.secondaryKey))) {
        return { path: ent.scopePath, rights: r.rights, expiresAt: Infinity, keyName: user };
      }
    }
    return null;
  }
}

// Claims held by one AMQP connection.
export class Claims {
  constructor() {
    this.list = []; // {path, rights:Set, expiresAt}
    this.everAccepted = false;
  }

  add(claim) {
    this.list = this.list.filter((c) => c.path !== claim.path);
    this.list.push({ path: claim.path, rights: new Set(claim.rights), expiresAt: claim.expiresAt });
    this.everAccepted = true;
  }

  // allows reports whether a non-expired claim covers path with the right
  // (Manage implies Send and Listen).
  allows(path, right, now = Date.now()) {
    return this.list.some(
      (c) => c.expiresAt > now && pathCovers(c.path, path) && (c.rights.has(right) || c.rights.has('Manage')),
    );
  }

  dropExpired(now = Date.now()) {
    const before = this.list.length;
    this.list = this.list.filter((c) => c.expiresAt > now);
    return before !== this.list.length;
  }
}
