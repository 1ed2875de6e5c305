// @ts-check
/** The rules a member name of a bundle obeys (SPEC 5): one place for the tar reader. */
import { ASSIGNED, FOLD_MULTI, FOLD_RUNS, UNICODE_VERSION } from './unicode14.mjs';

export const MAX_NAME_BYTES = 4096;
export const MAX_SEGMENT_BYTES = 255;
const SEGMENT = '(?!\\.\\.?(?:/|$))[A-Za-z0-9._+=@,~-]{1,255}';
const PLAIN = new RegExp(`^${SEGMENT}(?:/${SEGMENT})*$`);

/**
 * The bytes `text` takes in UTF-8 (a lone surrogate three, as the Python verifier counts
 * it), counted without encoding it: an encoded copy of each of 61,000 hostile names was
 * 67 MB of buffers for the page to collect, and took it 140 MB higher.
 * @param {string} text
 */
export function utf8Length(text) {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a pair: two units, four bytes
      i++;
    } else n += 2;
  }
  return n;
}

/**
 * Why `name` (without a trailing '/') cannot be a member name, or null.
 * @param {string} name
 */
export function nameProblem(name) {
  // Plain ASCII segments, none "." or "..": nothing below can apply (the exporter's names).
  if (name.length <= MAX_NAME_BYTES && PLAIN.test(name)) return null;
  if (utf8Length(name) > MAX_NAME_BYTES) return `name longer than ${MAX_NAME_BYTES} bytes`;
  if (name.startsWith('/')) return 'absolute path';
  if (name.includes('\\')) return 'backslash in name';
  if (/[\x00-\x1f\x7f]/.test(name)) return 'control character in name';
  for (const segment of name.split('/')) {
    if (segment === '') return 'empty path segment';
    if (segment === '.' || segment === '..') return `'${segment}' path segment`;
    if (utf8Length(segment) > MAX_SEGMENT_BYTES) return `path segment longer than ${MAX_SEGMENT_BYTES} bytes`;
  }
  if (/^[\x00-\x7f]*$/.test(name)) return null;
  const unassigned = firstUnassigned(name);
  if (unassigned !== null) {
    return `U+${unassigned.toString(16).toUpperCase().padStart(4, '0')} is not assigned in Unicode ${UNICODE_VERSION}`;
  }
  if (name.normalize('NFC') !== name) return 'name is not NFC-normalised';
  return null;
}

/** @type {{starts: Uint32Array, ends: Uint32Array, fold: Map<number, string>} | null} */
let tables = null;

/** The generated Unicode 14.0.0 tables (js/scripts/unicode-tables.py), decoded once. */
function unicodeTables() {
  if (tables !== null) return tables;
  const ranges = ASSIGNED.split(',');
  const starts = new Uint32Array(ranges.length);
  const ends = new Uint32Array(ranges.length);
  ranges.forEach((range, i) => {
    const [a, b] = range.split('-');
    starts[i] = parseInt(a, 16);
    ends[i] = parseInt(b, 16);
  });
  /** @type {Map<number, string>} */
  const fold = new Map();
  for (const run of FOLD_RUNS.split(',')) {
    const [start, count, stride, delta] = run.split(':').map((x) => parseInt(x, 16));
    for (let i = 0, cp = start; i < count; i++, cp += stride) fold.set(cp, String.fromCodePoint(cp + delta));
  }
  for (const entry of FOLD_MULTI.split(',')) {
    const [cp, to] = entry.split(':');
    fold.set(parseInt(cp, 16), String.fromCodePoint(...to.split('.').map((x) => parseInt(x, 16))));
  }
  tables = { starts, ends, fold };
  return tables;
}

/**
 * The first code point of `name` not assigned in Unicode 14.0.0, or null. NFC and case
 * folding are stable only for assigned characters; a later one may compose or fold
 * differently in another engine, so such names are refused by both verifiers.
 * @param {string} name
 */
export function firstUnassigned(name) {
  const { starts, ends } = unicodeTables();
  for (const char of name) {
    const cp = /** @type {number} */ (char.codePointAt(0));
    if (cp <= ends[0]) continue;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= cp) lo = mid;
      else hi = mid - 1;
    }
    if (cp > ends[lo]) return cp;
  }
  return null;
}

/**
 * The form two names must not share: full case folding, then NFC. JavaScript has no
 * casefold, and its case mappings follow the engine's Unicode version: the folding is
 * Python's str.casefold(), read from a table generated from it (js/scripts/unicode-tables.py),
 * so the two verifiers fold alike by construction (js/test/unicode.test.mjs checks every
 * code point).
 * @param {string} name
 */
export function folded(name) {
  if (/^[\x00-\x7f]*$/.test(name)) return name.toLowerCase();
  const { fold } = unicodeTables();
  let out = '';
  for (const char of name) out += fold.get(/** @type {number} */ (char.codePointAt(0))) ?? char;
  return out.normalize('NFC');
}
