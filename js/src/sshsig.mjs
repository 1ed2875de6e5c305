// @ts-check
/**
 * OpenSSH SSHSIG signatures (PROTOCOL.sshsig) with Ed25519 keys, and allowed_signers
 * files as ssh-keygen reads them (SPEC 11.3). Parsing is strict: the armor, the
 * base64, every field of the blob, no trailing bytes; verification is Ed25519 over
 * the signed-data structure, through an injected verifier (WebCrypto).
 */
import { TrustError } from './errors.mjs';
import { ENC, UTF8 } from './util.mjs';

export const NAMESPACE = 'evalbook-bundle-head-v1';
const BEGIN = '-----BEGIN SSH SIGNATURE-----';
const END = '-----END SSH SIGNATURE-----';
const MAGIC = 'SSHSIG';
const KEY_TYPE = 'ssh-ed25519';
const HASHES = new Set(['sha512', 'sha256']);

/**
 * A value read from a signature, in quotes but not escaped: text from a signature is
 * escaped once, where it is shown (textsafe `shown`), never here as well (as the Python
 * verifier's `_quoted`), so a backslash reads as one backslash in both.
 * @param {unknown} value
 * @returns {string}
 */
export function quoted(value) {
  return `'${String(value)}'`;
}

/** @param {string} s */
function b64decode(s) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) throw new Error('not valid base64');
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** @param {Uint8Array} b */
function b64encode(b) {
  let s = '';
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return btoa(s);
}

class Reader {
  /** @param {Uint8Array} data @param {string} what */
  constructor(data, what) {
    this.d = data;
    this.p = 0;
    this.what = what;
  }

  /** @param {number} n @param {string} field */
  take(n, field) {
    if (this.p + n > this.d.length) throw new TrustError(`${this.what}: truncated at ${field}`);
    const out = this.d.subarray(this.p, this.p + n);
    this.p += n;
    return out;
  }

  /** @param {string} field */
  uint32(field) {
    const b = this.take(4, field);
    return ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
  }

  /** @param {string} field */
  string(field) {
    return this.take(this.uint32(field), field);
  }

  /** @param {string} field */
  text(field) {
    const b = this.string(field);
    if (b.includes(0)) throw new TrustError(`${this.what}: ${field} contains a NUL byte`);
    try {
      return UTF8.decode(b);
    } catch {
      throw new TrustError(`${this.what}: ${field} is not UTF-8`);
    }
  }

  end() {
    if (this.p !== this.d.length) throw new TrustError(`${this.what}: ${this.d.length - this.p} bytes of trailing data`);
  }
}

/** @param {Uint8Array[]} parts */
function cat(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** @param {Uint8Array} b */
function sshString(b) {
  const len = new Uint8Array(4);
  new DataView(len.buffer).setUint32(0, b.length);
  return cat(len, b);
}

/**
 * The fingerprint ssh-keygen prints: SHA256: and unpadded base64.
 * @param {Uint8Array} keyBlob @param {import('./bagread.mjs').HashFactory} sha256
 */
export function fingerprint(keyBlob, sha256) {
  const h = sha256();
  h.update(keyBlob);
  const hexed = h.hex();
  const raw = new Uint8Array(32);
  for (let i = 0; i < 32; i++) raw[i] = parseInt(hexed.slice(2 * i, 2 * i + 2), 16);
  return 'SHA256:' + b64encode(raw).replace(/=+$/, '');
}

/** @param {Uint8Array} blob @param {string} what */
function parseKeyBlob(blob, what) {
  const r = new Reader(blob, what);
  const type = r.text('key type');
  if (type !== KEY_TYPE) return { type, key: null };
  const key = r.string('ed25519 key');
  r.end();
  if (key.length !== 32) throw new TrustError(`${what}: ed25519 key is ${key.length} bytes, want 32`);
  return { type, key };
}

/**
 * Parse an armored SSHSIG signature.
 * @param {string} text @param {string} source
 */
export function parseSignature(text, source) {
  if (!text.startsWith(BEGIN)) throw new TrustError(`${source}: not an SSH signature (missing ${BEGIN})`);
  let rest = text.slice(BEGIN.length);
  // ssh-keygen reads the header with its LF: one ending in CRLF is refused there
  // ("missing header"), so it is refused here too (SPEC 11.3, the auditor's path).
  if (!rest.startsWith('\n')) throw new TrustError(`${source}: SSH signature header line must end with a plain line feed, as ssh-keygen reads it (not CRLF, not followed by other text)`);
  rest = rest.slice(1);
  const end = rest.indexOf('\n' + END);
  if (end < 0) throw new TrustError(`${source}: SSH signature has no ${END} line`);
  const trailer = rest.slice(end + 1 + END.length);
  if (!/^[ \t\r\n\v\f]*$/.test(trailer)) throw new TrustError(`${source}: unexpected text after ${END}`);
  const body = rest.slice(0, end).replace(/[ \t\r\n\v\f]+/g, '');
  if (!body) throw new TrustError(`${source}: SSH signature body is empty`);
  let blob;
  try {
    blob = b64decode(body);
  } catch {
    throw new TrustError(`${source}: SSH signature body is not valid base64`);
  }
  const what = `${source}: SSH signature blob`;
  const r = new Reader(blob, what);
  if (String.fromCharCode(...r.take(6, 'magic')) !== MAGIC) throw new TrustError(`${what}: does not start with SSHSIG`);
  const version = r.uint32('version');
  if (version !== 1) throw new TrustError(`${what}: version ${version}, only version 1 is known`);
  const publicKeyBlob = r.string('public key');
  const namespace = r.text('namespace');
  const reserved = r.string('reserved');
  const hashAlgorithm = r.text('hash algorithm');
  const signatureBlob = r.string('signature');
  r.end();
  if (!namespace) throw new TrustError(`${what}: namespace is empty`);
  const { type, key } = parseKeyBlob(publicKeyBlob, `${what} public key`);
  const sr = new Reader(signatureBlob, `${what} signature`);
  const sigType = sr.text('signature type');
  let signature = null;
  if (type === KEY_TYPE) {
    if (sigType !== KEY_TYPE) throw new TrustError(`${what}: signature type ${quoted(sigType)} does not match key type ${KEY_TYPE}`);
    signature = sr.string('ed25519 signature');
    sr.end();
    if (signature.length !== 64) throw new TrustError(`${what}: ed25519 signature is ${signature.length} bytes, want 64`);
  }
  return { keyType: type, publicKeyBlob, publicKey: key, namespace, reserved, hashAlgorithm, signature };
}

/**
 * Check a signature over `message` with the key it carries (ssh-keygen -Y
 * check-novalidate). Returns the parsed signature with its fingerprint; throws
 * TrustError naming the rule broken.
 * @param {Uint8Array} message @param {string} text @param {string} source
 * @param {{sha256: import('./bagread.mjs').HashFactory, sha512: (d: Uint8Array) => Promise<Uint8Array>,
 *   verifyEd25519: (k: Uint8Array, s: Uint8Array, m: Uint8Array) => Promise<boolean>}} crypto
 * @param {string} [namespace]
 */
export async function checkSignature(message, text, source, crypto, namespace = NAMESPACE) {
  const sig = parseSignature(text, source);
  if (sig.keyType !== KEY_TYPE || !sig.publicKey || !sig.signature) {
    throw new TrustError(`${source}: signed with a ${sig.keyType} key; only ${KEY_TYPE} is accepted`);
  }
  if (sig.namespace !== namespace) throw new TrustError(`${source}: signature is for namespace ${quoted(sig.namespace)}, not ${quoted(namespace)}`);
  if (!HASHES.has(sig.hashAlgorithm)) throw new TrustError(`${source}: hash algorithm ${quoted(sig.hashAlgorithm)} is not sha512 or sha256`);
  let digest;
  if (sig.hashAlgorithm === 'sha512') digest = await crypto.sha512(message);
  else {
    const h = crypto.sha256();
    h.update(message);
    const hx = h.hex();
    digest = new Uint8Array(32);
    for (let i = 0; i < 32; i++) digest[i] = parseInt(hx.slice(2 * i, 2 * i + 2), 16);
  }
  const signed = cat(ENC.encode(MAGIC), sshString(ENC.encode(namespace)), sshString(sig.reserved), sshString(ENC.encode(sig.hashAlgorithm)), sshString(digest));
  const fp = fingerprint(sig.publicKeyBlob, crypto.sha256);
  let ok = false;
  try {
    ok = await crypto.verifyEd25519(sig.publicKey, sig.signature, signed);
  } catch {
    ok = false;
  }
  if (!ok) throw new TrustError(`${source}: signature does not match the signed bytes (key ${fp})`);
  return { ...sig, fingerprint: fp };
}

// -- allowed signers

/** OpenSSH match_pattern: * any run, ? one character. @param {string} text @param {string} pattern */
export function matchPattern(text, pattern) {
  let t = 0;
  let p = 0;
  let starP = -1;
  let starT = 0;
  while (t < text.length) {
    if (p < pattern.length && (pattern[p] === '?' || pattern[p] === text[t])) {
      t++;
      p++;
    } else if (p < pattern.length && pattern[p] === '*') {
      starP = p;
      starT = t;
      p++;
    } else if (starP >= 0) {
      starT++;
      t = starT;
      p = starP + 1;
    } else return false;
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

/** @param {string} text @param {string} patterns */
export function matchPatternList(text, patterns) {
  const pieces = patterns.split(',');
  if (pieces.length > 1 && !pieces[pieces.length - 1]) pieces.pop();
  let positive = false;
  for (let pattern of pieces) {
    const negated = pattern.startsWith('!');
    if (negated) pattern = pattern.slice(1);
    if (matchPattern(text, pattern)) {
      if (negated) return false;
      positive = true;
    }
  }
  return positive;
}

/**
 * @typedef {{where: string, principals: string, keyType: string, keyBlob: Uint8Array, publicKey: Uint8Array|null,
 *   namespaces: string|null, certAuthority: boolean, validAfter: number|null, validBefore: number|null}} AllowedSigner
 */

/**
 * ssh-keygen's absolute times (parse_absolute_time), read as bundler/trust/sshsig.py reads
 * them: YYYYMMDD[HHMM[SS]], UTC when it ends in Z or UTC in any case, else local time;
 * fields in glibc strptime's ranges (day 1-31 whatever the month, second 0-61), the
 * moment normalised as timegm/mktime do; the epoch itself and earlier refused.
 * @param {string} value @param {string} where @param {string} option
 */
function parseTime(value, where, option) {
  let digits = value;
  let utc = false;
  if (value.length > 1 && value.slice(-1).toUpperCase() === 'Z') [utc, digits] = [true, value.slice(0, -1)];
  else if (value.length > 3 && value.slice(-3).toUpperCase() === 'UTC') [utc, digits] = [true, value.slice(0, -3)];
  if (!/^[0-9]+$/.test(digits) || ![8, 12, 14].includes(digits.length)) {
    throw new TrustError(`${where}: ${option}="${value}" is not YYYYMMDD[HHMM[SS]][Z]`);
  }
  const field = (/** @type {number} */ at) => Number(digits.slice(at, at + (at === 0 ? 4 : 2)) || '0');
  const [y, mo, d, h, mi, s] = [0, 4, 6, 8, 10, 12].map(field);
  if (!(mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 && s <= 61)) {
    throw new TrustError(`${where}: ${option}="${value}" is not a valid time`);
  }
  const date = utc ? new Date(Date.UTC(y, mo - 1, d, h, mi, s)) : new Date(y, mo - 1, d, h, mi, s);
  if (y < 100) date[utc ? 'setUTCFullYear' : 'setFullYear'](y, mo - 1, d);
  const t = date.getTime();
  if (Number.isNaN(t)) throw new TrustError(`${where}: ${option}="${value}" is not a valid time`);
  if (t <= 0) throw new TrustError(`${where}: ${option}="${value}" is not after 1970-01-01T00:00:00Z`);
  return Math.floor(t / 1000);
}

/**
 * Parse an allowed_signers file (ssh-keygen's format: principals, options, key type,
 * base64 key, comment; # comments and blank lines skipped).
 * @param {string} text @param {string} source
 * @returns {AllowedSigner[]}
 */
export function parseAllowedSigners(text, source) {
  /** @type {AllowedSigner[]} */
  const out = [];
  text.split('\n').forEach((raw, i) => {
    const where = `${source}:${i + 1}`;
    // ssh-keygen reads a line as a C string, ending it at a NUL: what follows would be
    // read here and not there (a principal list widened), so such a file is refused.
    if (raw.includes('\0')) throw new TrustError(`${where}: a NUL character (ssh-keygen ends the line there); not a valid allowed_signers file`);
    const line = raw.replace(/\r$/, '').replace(/^[ \t]+/, '');
    if (!line || line.startsWith('#')) return;
    // principals: first token; a quoted token taken whole
    let rest;
    let principals;
    // As ssh-keygen's strdelimw: the principals end at a space, a tab or a CR.
    const cut = line.search(/[ \t\r"]/);
    if (cut < 0) throw new TrustError(`${where}: line has principals but no key`);
    if (line[cut] === '"') {
      const close = line.indexOf('"', cut + 1);
      if (close < 0) throw new TrustError(`${where}: unterminated quote in principals`);
      principals = line.slice(0, cut) + line.slice(cut + 1, close);
      rest = line.slice(close + 1);
    } else {
      principals = line.slice(0, cut);
      rest = line.slice(cut);
    }
    if (!principals) throw new TrustError(`${where}: empty principals`);
    rest = rest.replace(/^[ \t\r]+/, '');
    /** @type {AllowedSigner} */
    const signer = { where, principals, keyType: '', keyBlob: new Uint8Array(0), publicKey: null, namespaces: null, certAuthority: false, validAfter: null, validBefore: null };
    // options, unless the next token is a key type
    if (!/^(ssh-|ecdsa-|sk-)/.test(rest)) {
      let j = 0;
      let inQuote = false;
      while (j < rest.length && (inQuote || !/[ \t]/.test(rest[j]))) {
        if (rest[j] === '"') inQuote = !inQuote;
        j++;
      }
      if (inQuote) throw new TrustError(`${where}: unterminated quote in options`);
      const opts = rest.slice(0, j);
      rest = rest.slice(j).replace(/^[ \t]+/, '');
      if (!rest) throw new TrustError(`${where}: options but no key`);
      const seen = new Set();
      let k = 0;
      while (k < opts.length) {
        const m = /^([A-Za-z-]+)/.exec(opts.slice(k));
        if (!m) throw new TrustError(`${where}: options must be separated by commas`);
        const name = m[1].toLowerCase();
        k += m[1].length;
        let value = null;
        if (opts[k] === '=') {
          if (opts[k + 1] !== '"') throw new TrustError(`${where}: ${name}= value must be in double quotes`);
          const close = opts.indexOf('"', k + 2);
          if (close < 0) throw new TrustError(`${where}: ${name}= value has no closing quote`);
          value = opts.slice(k + 2, close);
          k = close + 1;
        }
        if (seen.has(name)) throw new TrustError(`${where}: more than one "${name}" option`);
        seen.add(name);
        if (name === 'cert-authority' && value === null) signer.certAuthority = true;
        else if (name === 'namespaces' && value !== null) signer.namespaces = value;
        else if (name === 'valid-after' && value !== null) signer.validAfter = parseTime(value, where, name);
        else if (name === 'valid-before' && value !== null) signer.validBefore = parseTime(value, where, name);
        else throw new TrustError(`${where}: unknown option ${JSON.stringify(name)}`);
        if (k < opts.length) {
          if (opts[k] !== ',') throw new TrustError(`${where}: options must be separated by commas`);
          k++;
          if (k === opts.length) throw new TrustError(`${where}: options end with a comma`);
        }
      }
      if (signer.validAfter !== null && signer.validBefore !== null && signer.validBefore <= signer.validAfter) {
        throw new TrustError(`${where}: "valid-before" is not after "valid-after"`);
      }
    }
    // The key type and the base64 key each end at a space or a tab (sshkey_read).
    const km = /^([^ \t]+)[ \t]+([^ \t]+)/.exec(rest);
    if (!km) throw new TrustError(`${where}: missing key (want keytype base64-key)`);
    signer.keyType = km[1];
    let blob;
    try {
      blob = b64decode(km[2]);
    } catch {
      throw new TrustError(`${where}: ${km[1]} key is not valid base64`);
    }
    const parsed = parseKeyBlob(blob, `${where}: key`);
    if (parsed.type !== km[1]) throw new TrustError(`${where}: key is labelled ${km[1]} but holds ${parsed.type}`);
    signer.keyBlob = blob;
    signer.publicKey = parsed.key;
    out.push(signer);
  });
  if (!out.length) throw new TrustError(`${source}: allowed signers file lists no signers`);
  return out;
}

/**
 * The allowed signer a checked signature matches, or a TrustError saying why not.
 * @param {{publicKey: Uint8Array|null, fingerprint: string}} sig @param {AllowedSigner[]} allowed
 * @param {string|null} identity @param {string} source @param {number} now Unix seconds
 * @param {string} [namespace]
 */
export function matchSigner(sig, allowed, identity, source, now, namespace = NAMESPACE) {
  const key = sig.fingerprint;
  const holders = allowed.filter((s) => s.keyType === KEY_TYPE && s.publicKey && sig.publicKey && s.publicKey.every((b, i) => b === /** @type {Uint8Array} */ (sig.publicKey)[i]));
  if (!holders.length) throw new TrustError(`${source}: signing key ${key} is not in the allowed signers`);
  const reasons = [];
  for (const s of holders) {
    if (s.certAuthority) reasons.push(`${s.where} is a cert-authority line (certificates unsupported)`);
    else if (identity !== null && !matchPatternList(identity, s.principals)) reasons.push(`${s.where} does not list identity ${JSON.stringify(identity)}`);
    else if (s.namespaces !== null && !matchPatternList(namespace, s.namespaces)) reasons.push(`${s.where} restricts the key to namespaces ${JSON.stringify(s.namespaces)}`);
    else if (s.validAfter !== null && now < s.validAfter) reasons.push(`${s.where} makes the key valid from a later time`);
    else if (s.validBefore !== null && now > s.validBefore) reasons.push(`${s.where} made the key expire`);
    else return { principal: identity !== null ? identity : s.principals, fingerprint: key };
  }
  throw new TrustError(`${source}: signing key ${key} is not allowed: ${reasons.join('; ')}`);
}
