// @ts-check
/** Small helpers the claim groups share: digests of bytes, text, parsing kept files. */
import { JsonError } from './errors.mjs';
import { jsonText, parseText } from './json.mjs';
import { isCanonicalText } from './jcs.mjs';

export const ENC = new TextEncoder();
/**
 * The one UTF-8 decoder for bytes from a bundle or a file the user names: invalid UTF-8
 * throws, and a leading BOM is kept as U+FEFF (a TextDecoder drops it by default, so a
 * file starting with EF BB BF would read as if it did not; the Python verifier keeps it).
 */
export const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** @param {string} s */
export function isDigest(s) {
  return typeof s === 'string' && /^sha256:[0-9a-f]{64}$/.test(s);
}

/** @param {Uint8Array} b */
export function hex(b) {
  let s = '';
  for (let i = 0; i < b.length; i++) s += b[i].toString(16).padStart(2, '0');
  return s;
}

/** @param {string} h */
export function unhex(h) {
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Sixteen digits in a row: where an integer past 2^53 - 1 could be (it has at least 16). */
const LONG_DIGITS = /[0-9]{16}/;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/**
 * The value of a text that is its own JCS form, read by the native JSON.parse, or
 * undefined: then the strict reader must read it (and name what is wrong, if anything).
 * When the JCS form of what JSON.parse read is the text itself, the strict reader
 * accepts the text and reads the same value: a duplicate key would be missing from the
 * JCS form, a lone surrogate, a non-finite number and nesting past 64 levels make
 * canonicalText throw, and a number's canonical spelling is short. The one thing
 * JSON.parse rounds that the JCS form could still spell back is an integer past
 * 2^53 - 1, which the strict reader refuses: it needs sixteen digits in a row, so a
 * text that has them (as a hex digest often does, inside a string) is read natively
 * only when no number in the value is past 2^53 - 1. Exported bundles store their JSON
 * canonical, so the strict reader's character loop runs only on what is not.
 * @param {string} text the text of valid UTF-8 without a BOM (jsonText's)
 * @returns {unknown}
 */
export function nativeCanonical(text) {
  try {
    const value = JSON.parse(text);
    if (!isCanonicalText(value, text)) return undefined;
    return !LONG_DIGITS.test(text) || numbersSafe(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * True when every number in a value is within -(2^53 - 1)..(2^53 - 1). (The value is
 * JSON.parse's of a canonical text, so its nesting is within 64 levels.)
 * @param {unknown} v
 * @returns {boolean}
 */
function numbersSafe(v) {
  if (typeof v === 'number') return v <= MAX_SAFE && v >= -MAX_SAFE;
  if (v === null || typeof v !== 'object') return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!numbersSafe(v[i])) return false;
    return true;
  }
  for (const k in v) if (!numbersSafe(/** @type {Record<string, unknown>} */ (v)[k])) return false;
  return true;
}

/**
 * Parse the text of UTF-8 JSON bytes (jsonText's) strictly (parseJson's rules), through
 * nativeCanonical when the text is canonical, and say whether the bytes are the value's
 * JCS form (equal texts are equal bytes: jsonText admits only BOM-less valid UTF-8).
 * `collect`, a full collection where the host has one, runs between the native read
 * that found the text not canonical and the strict one: the first value (150,000
 * objects, say) is garbage by then, and V8 would grow the heap for the second rather
 * than collect it.
 * @param {string} text @param {string} source @param {() => void} [collect]
 * @returns {{value: unknown, canonical: boolean}}
 */
export function readText(text, source, collect) {
  const fast = nativeCanonical(text);
  if (fast !== undefined) return { value: fast, canonical: true };
  collect?.();
  const value = parseText(text, source);
  return { value, canonical: isCanonicalText(value, text) };
}

/**
 * Parse bytes strictly; with `canonical`, also require the bytes to be their JCS form.
 * @param {Uint8Array} data @param {string} source @param {boolean} canonical
 * @returns {unknown}
 */
export function loadJson(data, source, canonical) {
  const text = jsonText(data, source);
  const fast = nativeCanonical(text);
  if (fast !== undefined) return fast;
  const value = parseText(text, source);
  // Equal texts are equal bytes here (jsonText admits only BOM-less valid UTF-8).
  if (canonical && !isCanonicalText(value, text)) {
    throw new JsonError(`${source}: not stored canonical (bytes differ from the JCS form)`);
  }
  return value;
}

/**
 * (value, problem) of a kept JSON file: value undefined when it does not parse.
 * @param {import('./bagread.mjs').Bag} bag @param {string} path @param {boolean} canonical
 * @returns {[any, string|null]}
 */
export function parseKept(bag, path, canonical) {
  const data = bag.kept.get(path);
  if (data === undefined) return [undefined, 'missing from the bag'];
  try {
    const value = loadJson(data, path, canonical);
    // A document that is JSON null is no document: the claim that reads it fails as
    // for one that does not parse (the Python verifier reads it so too).
    if (value === null) return [undefined, `${path}: the document is null`];
    return [value, null];
  } catch (e) {
    if (e instanceof JsonError) return [undefined, e.message];
    throw e;
  }
}

/**
 * Byte-wise comparison of two strings' UTF-8 forms, which is code point order: UTF-16
 * order with surrogates (U+D800..U+DFFF) moved above U+E000..U+FFFF. No encoding.
 * @param {string} a @param {string} b
 */
export function byteOrder(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800) x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
    if (y >= 0xd800) y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    return x - y;
  }
  return a.length - b.length;
}

/** Compare strings by code point (Python's str order). @param {string} a @param {string} b */
export function codePointOrder(a, b) {
  return byteOrder(a, b);
}

/** A UTF-16 code unit at or above U+D800: only there can UTF-16 order differ from code point order. */
const HIGH_UNIT = /[\ud800-\uffff]/;

/**
 * The items in code point order of their keys (the strings themselves by default).
 * Strings with no code unit at or above U+D800 compare alike in UTF-16 and code point
 * order, so those the native sort orders itself, with no comparison called back.
 * @template T @param {Iterable<T>} xs @param {(x: T) => string} [key]
 */
export function sortedBy(xs, key) {
  const items = [...xs];
  if (key === undefined && items.every((x) => typeof x === 'string' && !HIGH_UNIT.test(x))) return items.sort();
  const k = key ?? ((/** @type {T} */ x) => String(x));
  return items.sort((a, b) => codePointOrder(k(a), k(b)));
}
