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
  const parts = [];
  write(value, parts, 0);
  return parts.join('');
}

/**
 * The canonical UTF-8 bytes of a JSON value.
 * @param {unknown} value
 */
export function canonicalBytes(value) {
  return ENCODER.encode(canonicalText(value));
}

/** @param {unknown} v @param {string[]} out @param {number} depth */
function write(v, out, depth) {
  if (v === null) out.push('null');
  else if (v === true) out.push('true');
  else if (v === false) out.push('false');
  else if (typeof v === 'number') out.push(number(v));
  else if (typeof v === 'string') out.push(string(v));
  else if (Array.isArray(v)) {
    if (depth + 1 > MAX_DEPTH) throw new JsonError(`nesting deeper than ${MAX_DEPTH} levels`);
    out.push('[');
    v.forEach((item, i) => {
      if (i) out.push(',');
      write(item, out, depth + 1);
    });
    out.push(']');
  } else if (typeof v === 'object') {
    if (depth + 1 > MAX_DEPTH) throw new JsonError(`nesting deeper than ${MAX_DEPTH} levels`);
    const o = /** @type {Record<string, unknown>} */ (v);
    // Array.prototype.sort on strings compares UTF-16 code units, as JCS requires.
    const keys = Object.keys(o).sort();
    out.push('{');
    keys.forEach((k, i) => {
      if (i) out.push(',');
      out.push(string(k), ':');
      write(o[k], out, depth + 1);
    });
    out.push('}');
  } else {
    throw new JsonError(`not a JSON value (${typeof v})`);
  }
}

/** @param {number} n */
function number(n) {
  if (!Number.isFinite(n)) throw new JsonError('NaN or infinite number');
  if (Object.is(n, -0)) return '0';
  return String(n);
}

/** @param {string} s */
export function string(s) {
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
