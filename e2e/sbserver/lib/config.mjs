// Entity configuration: a small JSON format of our own, or the official
// Service Bus emulator's Config.json ("UserConfig": {"Namespaces": [...]}).
import { readFileSync } from 'node:fs';

export const DEFAULTS = {
  lockDurationMs: 60_000, // Service Bus default PT1M
  maxDeliveryCount: 10, // docs/wire-servicebus.md §5.2 (MaxDeliveryCount)
  defaultMessageTimeToLiveMs: null, // null = effectively infinite (Standard tier)
  requiresDuplicateDetection: false,
  duplicateDetectionHistoryTimeWindowMs: 10 * 60_000, // docs/wire-servicebus.md §6.2: default 10 min
  requiresSession: false,
  maxMessageSizeInKilobytes: 256, // §6.3 Standard / emulator
  deadLetteringOnMessageExpiration: false,
};

// parseDuration accepts milliseconds (number), ISO 8601 ("PT5S", "P1DT2H"),
// or .NET TimeSpan text ("00:00:05", "1.00:00:00").
export function parseDuration(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number') return v;
  const s = String(v).trim();
  let m = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/i.exec(s);
  if (m && s !== 'P' && s.toUpperCase() !== 'PT') {
    const [d, h, mi, se] = m.slice(1).map((x) => (x ? Number(x) : 0));
    return Math.round(((d * 24 + h) * 60 + mi) * 60_000 + se * 1000);
  }
  m = /^(?:(\d+)\.)?(\d+):(\d+):(\d+(?:\.\d+)?)$/.exec(s);
  if (m) {
    const [d, h, mi, se] = [m[1] ? Number(m[1]) : 0, Number(m[2]), Number(m[3]), Number(m[4])];
    return Math.round(((d * 24 + h) * 60 + mi) * 60_000 + se * 1000);
  }
  if (/^\d+$/.test(s)) return Number(s);
  throw new Error(`config: ${what}: cannot parse duration ${JSON.stringify(v)}`);
}

function pick(o, ...names) {
  for (const n of names) {
    if (o && o[n] !== undefined) return o[n];
  }
  return undefined;
}

function entityProps(raw, where, inherited = {}) {
  const p = raw.Properties || raw.properties || raw;
  const out = { ...DEFAULTS, ...inherited };
  const lock = parseDuration(pick(p, 'lockDuration', 'LockDuration'), where + '.lockDuration');
  if (lock !== undefined) out.lockDurationMs = lock;
  const mdc = pick(p, 'maxDeliveryCount', 'MaxDeliveryCount');
  if (mdc !== undefined) out.maxDeliveryCount = Number(mdc);
  const ttl = parseDuration(pick(p, 'defaultMessageTimeToLive', 'DefaultMessageTimeToLive'), where + '.defaultMessageTimeToLive');
  if (ttl !== undefined) out.defaultMessageTimeToLiveMs = ttl;
  const dd = pick(p, 'requiresDuplicateDetection', 'RequiresDuplicateDetection');
  if (dd !== undefined) out.requiresDuplicateDetection = Boolean(dd);
  const win = parseDuration(
    pick(p, 'duplicateDetectionHistoryTimeWindow', 'DuplicateDetectionHistoryTimeWindow'),
    where + '.duplicateDetectionHistoryTimeWindow',
  );
  if (win !== undefined) out.duplicateDetectionHistoryTimeWindowMs = win;
  const rs = pick(p, 'requiresSession', 'RequiresSession');
  if (rs !== undefined) out.requiresSession = Boolean(rs);
  const mms = pick(p, 'maxMessageSizeInKilobytes', 'MaxMessageSizeInKilobytes');
  if (mms !== undefined) out.maxMessageSizeInKilobytes = Number(mms);
  const dlx = pick(p, 'deadLetteringOnMessageExpiration', 'DeadLetteringOnMessageExpiration');
  if (dlx !== undefined) out.deadLetteringOnMessageExpiration = Boolean(dlx);
  const rules = pick(raw, 'authorizationRules', 'AuthorizationRules') || pick(p, 'authorizationRules');
  out.authorizationRules = rules ? rules.map(normRule) : [];
  return out;
}

function normRule(r) {
  const rights = (r.rights || r.Rights || ['Manage', 'Send', 'Listen']).map((x) => {
    const s = String(x).toLowerCase();
    if (s === 'manage') return 'Manage';
    if (s === 'send') return 'Send';
    if (s === 'listen') return 'Listen';
    throw new Error(`config: unknown right ${x}`);
  });
  const name = r.name || r.keyName || r.KeyName || r.Name;
  const key = r.key || r.primaryKey || r.Key || r.PrimaryKey;
  if (!name || !key) throw new Error('config: an authorization rule needs name and key');
  return { name, key, secondaryKey: r.secondaryKey || r.SecondaryKey, rights };
}

// normalizeConfig returns {namespace, hosts, rules, queues, topics}.
export function normalizeConfig(raw) {
  let src = raw;
  if (raw.UserConfig) {
    const nss = raw.UserConfig.Namespaces || [];
    if (nss.length !== 1) throw new Error('config: UserConfig must have exactly one namespace');
    src = { namespace: nss[0].Name, queues: nss[0].Queues || [], topics: nss[0].Topics || [] };
  }
  const rules = (src.sharedAccessPolicies || src.authorizationRules || [
    // The official emulator's well-known rule (overview-emulator.md); tests
    // pass their own.
    { name: 'RootManageSharedAccessKey', key: 'SAS_KEY_VALUE', rights: ['Manage', 'Send', 'Listen'] },
  ]).map(normRule);
  const hosts = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
  for (const h of src.hosts || []) hosts.add(String(h).toLowerCase());
  if (src.namespace) {
    hosts.add(String(src.namespace).toLowerCase());
    hosts.add(`${String(src.namespace).toLowerCase()}.servicebus.windows.net`);
  }
  const queues = (src.queues || []).map((q, i) => {
    const name = q.name || q.Name;
    if (!name) throw new Error(`config: queues[${i}] has no name`);
    return { name, ...entityProps(q, `queues[${i}]`) };
  });
  const topics = (src.topics || []).map((t, i) => {
    const name = t.name || t.Name;
    if (!name) throw new Error(`config: topics[${i}] has no name`);
    const props = entityProps(t, `topics[${i}]`);
    const subs = (t.subscriptions || t.Subscriptions || []).map((s, j) => {
      const sname = s.name || s.Name;
      if (!sname) throw new Error(`config: topics[${i}].subscriptions[${j}] has no name`);
      const sp = entityProps(s, `topics[${i}].subscriptions[${j}]`);
      const rulesCfg = s.rules || s.Rules || [];
      for (const r of rulesCfg) {
        const f = (r.Properties || r.properties || r).FilterType || (r.Properties || r.properties || r).filterType;
        if (f && String(f).toLowerCase() !== 'truefilter' && String(f).toLowerCase() !== 'true') {
          throw new Error(`config: subscription ${name}/${sname}: only the default TrueFilter is implemented (got ${f})`);
        }
      }
      return { name: sname, ...sp };
    });
    return { name, ...props, subscriptions: subs };
  });
  return { namespace: src.namespace || 'localhost', hosts, rules, queues, topics };
}

export function loadConfigFile(path) {
  return normalizeConfig(JSON.parse(readFileSync(path, 'utf8')));
}
