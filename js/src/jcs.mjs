// @ts-check
/** RFC 8785 (JCS) serialisation of values the strict reader produced (SPEC 2). */
import { JsonError } from './errors.mjs';
import { MAX_DEPTH } from './json.mjs';

const ENCODER = new TextEncoder();

/**
 * The canonical text of a JSON value.
 * @param {unknown} value
 * @returns {string}
 */
export function canonicalText(value) {
  return write(value, 0);
}

/**
 * The canonical UTF-8 bytes of a JSON value.
 * @param {unknown} value
 */
export function canonicalBytes(value) {
  return ENCODER.encode(canonicalText(value));
}

/** @param {unknown} v @param {number} depth @returns {string} */
function write(v, depth) {
  if (v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (typeof v === 'number') return number(v);
  if (typeof v === 'string') return string(v);
  if (Array.isArray(v)) {
    if (depth + 1 > MAX_DEPTH) throw new JsonError(`nesting deeper than ${MAX_DEPTH} levels`);
    let out = '[';
    for (let i = 0; i < v.length; i++) {
      if (i) out += ',';
      out += write(v[i], depth + 1);
    }
    return out + ']';
  }
  if (typeof v === 'object') {
    if (depth + 1 > MAX_DEPTH) throw new JsonError(`nesting deeper than ${MAX_DEPTH} levels`);
    const o = /** @type {Record<string, unknown>} */ (v);
    // Array.prototype.sort on strings compares UTF-16 code units, as JCS requires.
    const keys = Object.keys(o).sort();
    let out = '{';
    for (let i = 0; i < keys.length; i++) {
      if (i) out += ',';
      out += string(keys[i]) + ':' + write(o[keys[i]], depth + 1);
    }
    return out + '}';
  }
  throw new JsonError(`not a JSON value (${typeof v})`);
}

/** @param {number} n */
function number(n) {
  if (!Number.isFinite(n)) throw new JsonError('NaN or infinite number');
  if (Object.is(n, -0)) return '0';
  return String(n);
}

/** A surrogate not part of a pair (with the u flag a pair is one code point). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A string as JCS writes it: RFC 8785 takes ECMAScript's JSON.stringify escaping (\b \t
 * \n \f \r, other controls as lowercase \u00xx, '"' and '\\', nothing else), which
 * the native one gives; a lone surrogate, which JSON.stringify would escape, is refused.
 * @param {string} s
 */
export function string(s) {
  if (LONE_SURROGATE.test(s)) throw new JsonError('lone surrogate in string');
  return JSON.stringify(s);
}

/** The same by hand (the reference the tests hold string() to). @param {string} s */
export function stringByHand(s) {
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdfff) {
      const hi = c <= 0xdbff;
      const next = s.charCodeAt(i + 1);
      if (hi && next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      throw new JsonError('lone surrogate in string');
    }
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue;
    out += s.slice(start, i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0c) out += '\\f';
    else if (c === 0x0d) out += '\\r';
    else out += '\\u' + c.toString(16).padStart(4, '0');
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

/**
 * Bytes equal, element by element.
 * @param {Uint8Array} a @param {Uint8Array} b
 */
export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
