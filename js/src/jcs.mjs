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
  // JCS is JSON.stringify with every object's keys in UTF-16 order (RFC 8785 takes its
  // number and string forms from ECMAScript): where the keys already come in that order
  // and every value is JSON the native one writes it; anything else, by hand below,
  // which also names what is not JSON.
  return nativeWrites(value, 0) ? JSON.stringify(value) : write(value, 0);
}

/**
 * True when JSON.stringify writes `v` as JCS does: null, booleans, finite numbers,
 * well-formed strings, arrays, plain objects whose keys (well-formed) enumerate in
 * UTF-16 order, nested at most MAX_DEPTH deep. False sends it to write().
 * @param {unknown} v @param {number} depth
 * @returns {boolean}
 */
function nativeWrites(v, depth) {
  switch (typeof v) {
    case 'string':
      return wellFormed(v);
    case 'number':
      return Number.isFinite(v);
    case 'boolean':
      return true;
    case 'object': {
      if (v === null) return true;
      if (depth + 1 > MAX_DEPTH) return false;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) if (!nativeWrites(v[i], depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      const o = /** @type {Record<string, unknown>} */ (v);
      const keys = Object.keys(o);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        if ((i > 0 && !(keys[i - 1] < k)) || !wellFormed(k) || !nativeWrites(o[k], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/** @param {string} s */
function wellFormed(s) {
  return WELL_FORMED ? s.isWellFormed() : !LONE_SURROGATE.test(s);
}

/**
 * The canonical text written by hand, never through JSON.stringify (the tests hold
 * canonicalText to it).
 * @param {unknown} value
 */
export function canonicalTextByHand(value) {
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
  /** @type {string[]} */
  const out = [];
  pieces(v, depth, (p) => {
    out.push(p);
    return true;
  });
  return out.join('');
}

/**
 * Each piece of a value's canonical text in order, to `emit`, which returns false to
 * stop (then so does this); the one by-hand writer of RFC 8785, so that a document of
 * tens of megabytes can be compared with its text, or hashed, without its canonical
 * text ever being built whole. Throws JsonError for what is not JSON.
 * @param {unknown} v @param {number} depth @param {(piece: string) => boolean} emit
 * @returns {boolean}
 */
function pieces(v, depth, emit) {
  if (v === null) return emit('null');
  if (v === true) return emit('true');
  if (v === false) return emit('false');
  if (typeof v === 'number') return emit(number(v));
  if (typeof v === 'string') return emit(string(v));
  if (typeof v !== 'object') throw new JsonError(`not a JSON value (${typeof v})`);
  if (depth + 1 > MAX_DEPTH) throw new JsonError(`nesting deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(v)) {
    if (!emit('[')) return false;
    for (let i = 0; i < v.length; i++) {
      if ((i && !emit(',')) || !pieces(v[i], depth + 1, emit)) return false;
    }
    return emit(']');
  }
  const o = /** @type {Record<string, unknown>} */ (v);
  // Array.prototype.sort on strings compares UTF-16 code units, as JCS requires.
  const keys = Object.keys(o).sort();
  if (!emit('{')) return false;
  for (let i = 0; i < keys.length; i++) {
    if (!emit((i ? ',' : '') + string(keys[i]) + ':') || !pieces(o[keys[i]], depth + 1, emit)) return false;
  }
  return emit('}');
}

/**
 * True when `text` is the canonical text of `value` (what it was read from, say),
 * compared piece by piece; false too when the value is not JSON.
 * @param {unknown} value @param {string} text
 */
export function isCanonicalText(value, text) {
  let at = 0;
  try {
    const whole = pieces(value, 0, (p) => {
      if (!text.startsWith(p, at)) return false;
      at += p.length;
      return true;
    });
    return whole && at === text.length;
  } catch (e) {
    if (e instanceof JsonError) return false;
    throw e;
  }
}

/**
 * The SHA-256 of a value's canonical UTF-8 bytes, written to the hash a piece at a
 * time (at most about 64 K characters held). Throws JsonError for what is not JSON.
 * @param {unknown} value @param {{update(data: Uint8Array): void, hex(): string}} hash
 */
export function canonicalSha256(value, hash) {
  let held = '';
  pieces(value, 0, (p) => {
    held += p;
    if (held.length >= 65536) {
      hash.update(ENCODER.encode(held));
      held = '';
    }
    return true;
  });
  hash.update(ENCODER.encode(held));
  return hash.hex();
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
  if (!wellFormed(s)) throw new JsonError('lone surrogate in string');
  return JSON.stringify(s);
}
/** String.prototype.isWellFormed (Node 20, current browsers), several times faster than the pattern. */
const WELL_FORMED = typeof ''.isWellFormed === 'function';

/**
 * Bytes equal, element by element.
 * @param {Uint8Array} a @param {Uint8Array} b
 */
export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
