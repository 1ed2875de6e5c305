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
  for (const ch of s) out += HIDDEN.test(ch) ? escape(ch) : ch;
  return out;
}

/**
 * A line of the console summary shows at most this many characters of one untrusted
 * text (a claim's fields, an error), counted as shown, escapes included, in code
 * points, and cut between whole characters and escapes; the record keeps it whole. The
 * Python verifier cuts the same way (bundler/core/textsafe.py).
 */
export const CONSOLE_CHARS = 300;
const CUT = ' ... (cut: --json gives it whole)';

/**
 * shown() of a value up to CONSOLE_CHARS characters, marked when cut.
 * @param {unknown} value
 */
export function shownClipped(value) {
  let out = '';
  let size = 0;
  for (const ch of String(value)) {
    const piece = HIDDEN.test(ch) ? escape(ch) : ch;
    const width = piece === ch ? 1 : piece.length;
    if (size + width > CONSOLE_CHARS) return out + CUT;
    out += piece;
    size += width;
  }
  return out;
}
