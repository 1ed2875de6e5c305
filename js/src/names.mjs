// @ts-check
/** The rules a member name of a bundle obeys (SPEC 5): one place for the tar reader. */

export const MAX_NAME_BYTES = 4096;
export const MAX_SEGMENT_BYTES = 255;
const ENC = new TextEncoder();
const SEGMENT = '(?!\\.\\.?(?:/|$))[A-Za-z0-9._+=@,~-]{1,255}';
const PLAIN = new RegExp(`^${SEGMENT}(?:/${SEGMENT})*$`);

/**
 * Why `name` (without a trailing '/') cannot be a member name, or null.
 * @param {string} name
 */
export function nameProblem(name) {
  // Plain ASCII segments, none "." or "..": nothing below can apply (the exporter's names).
  if (name.length <= MAX_NAME_BYTES && PLAIN.test(name)) return null;
  if (ENC.encode(name).length > MAX_NAME_BYTES) return `name longer than ${MAX_NAME_BYTES} bytes`;
  if (name.startsWith('/')) return 'absolute path';
  if (name.includes('\\')) return 'backslash in name';
  if (/[\x00-\x1f\x7f]/.test(name)) return 'control character in name';
  for (const segment of name.split('/')) {
    if (segment === '') return 'empty path segment';
    if (segment === '.' || segment === '..') return `'${segment}' path segment`;
    if (ENC.encode(segment).length > MAX_SEGMENT_BYTES) return `path segment longer than ${MAX_SEGMENT_BYTES} bytes`;
  }
  if (name.normalize('NFC') !== name) return 'name is not NFC-normalised';
  return null;
}

/**
 * The form two names must not share: full case folding, then NFC. JavaScript has no
 * casefold; upper-casing then lower-casing gives the full foldings (ß -> ss), and the
 * final-sigma rule of toLowerCase is undone.
 * @param {string} name
 */
export function folded(name) {
  if (/^[\x00-\x7f]*$/.test(name)) return name.toLowerCase();
  return name.toUpperCase().toLowerCase().replace(/\u03c2/g, '\u03c3').normalize('NFC');
}
