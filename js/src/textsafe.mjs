// @ts-check
/**
 * One escaping function for untrusted text shown to a person (SPEC 5 and 14): controls,
 * ESC, CR, bidirectional controls, invisible and unassigned characters, odd spaces,
 * variation selectors, tag characters and the Hangul and Braille blanks are written as
 * visible escapes (\x1b, \u202e), a backslash as \\; never a newline.
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\p{Cn}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\uffa0\ufe00-\ufe0f\u{e0000}-\u{e007f}\u{e0100}-\u{e01ef}\\]/u;

/** @param {string} ch */
function escape(ch) {
  if (ch === '\\') return '\\\\';
  const code = /** @type {number} */ (ch.codePointAt(0));
  if (code < 0x100) return '\\x' + code.toString(16).padStart(2, '0');
  if (code < 0x10000) return '\\u' + code.toString(16).padStart(4, '0');
  return '\\U' + code.toString(16).padStart(8, '0');
}

/** @param {unknown} value */
export function shown(value) {
  const s = String(value);
  if (/^[\x20-\x5b\x5d-\x7e]*$/.test(s)) return s;
  let out = '';
  // Iterate by code point; a lone surrogate comes out as one code unit and is escaped.
  for (const ch of s) out += shownChar(ch);
  return out;
}

/**
 * A line of the console summary shows at most this many characters of one untrusted
 * text (a claim's fields, an error), counted as shown, escapes included, in code
 * points: the first and the last half of them, cut between whole characters and
 * escapes, so that a message's rule, which follows the names it quotes, is still read.
 * The record keeps it whole. The Python verifier cuts the same way
 * (bundler/core/textsafe.py).
 */
export const CONSOLE_CHARS = 1000;
const CUT = ' ... (cut: --json gives it whole) ... ';

/** @param {string} ch one code point */
function shownChar(ch) {
  return HIDDEN.test(ch) ? escape(ch) : ch;
}

/** Characters a shown piece takes, in code points (an escape is ASCII). @param {string} piece @param {string} ch */
function width(piece, ch) {
  return piece === ch ? 1 : piece.length;
}

/**
 * shown() of a value if it is at most `limit` characters as shown; else its first and
 * last `limit` / 2, with `cut` between them. The page cuts the fields of the failed
 * claims it lists the same way, at a larger limit and saying where the whole text is.
 * @param {unknown} value @param {number} [limit] an even number @param {string} [cut]
 */
export function shownClipped(value, limit = CONSOLE_CHARS, cut = CUT) {
  const s = String(value);
  /** @type {string[]} */
  const head = []; // the first characters, as long as they are within the limit shown
  /** @type {number[]} */
  const widths = [];
  let size = 0;
  for (const ch of s) {
    const w = width(shownChar(ch), ch);
    size += w;
    if (size > limit) break;
    head.push(ch);
    widths.push(w);
  }
  if (size <= limit) return head.map(shownChar).join('');
  const half = limit / 2;
  let kept = 0;
  size = 0;
  for (; kept < head.length && size + widths[kept] <= half; kept++) size += widths[kept];
  const front = head.slice(0, kept).join('');
  // The last characters, from at most 2 * half units before the end (a character is at
  // most two), never before the front's end nor from the second half of a pair.
  let start = Math.max(front.length, s.length - 2 * half);
  const first = s.charCodeAt(start);
  if (start > front.length && first >= 0xdc00 && first <= 0xdfff) start++;
  const last = Array.from(s.slice(start));
  /** @type {string[]} */
  const tail = [];
  size = 0;
  for (let i = last.length - 1; i >= 0; i--) {
    const piece = shownChar(last[i]);
    size += width(piece, last[i]);
    if (size > half) break;
    tail.push(piece);
  }
  return head.slice(0, kept).map(shownChar).join('') + cut + tail.reverse().join('');
}
