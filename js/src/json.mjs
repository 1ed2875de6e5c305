// @ts-check
/**
 * The strict JSON reader of SPEC 2. `JSON.parse` keeps the last of duplicate keys,
 * accepts lone surrogates, rounds big integers and turns 1e400 into Infinity; this
 * reader refuses each of those, a byte order mark, invalid UTF-8 and nesting deeper
 * than 64, naming the byte offset and the rule.
 */
import { JsonError } from './errors.mjs';

export const MAX_DEPTH = 64;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const DECODER = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const MAX_NUMBER_CHARS = 4096;
/** The one-character escapes JSON has, after the backslash. */
const SIMPLE_ESCAPES = '"\\/bfnrt';

/**
 * Parse UTF-8 JSON bytes strictly.
 * @param {Uint8Array} bytes
 * @param {string} source names the document in errors
 * @returns {unknown}
 */
export function parseJson(bytes, source) {
  return parseText(jsonText(bytes, source), source);
}

/**
 * The text of UTF-8 JSON bytes: no byte order mark, valid UTF-8. Two such byte strings
 * are equal exactly when their texts are.
 * @param {Uint8Array} bytes
 * @param {string} source names the document in errors
 */
export function jsonText(bytes, source) {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new JsonError(`${source}: byte order mark (not allowed)`);
  }
  try {
    return DECODER.decode(bytes);
  } catch {
    throw new JsonError(`${source}: not valid UTF-8`);
  }
}

/**
 * Parse JSON text strictly (the rules of parseJson but UTF-8).
 * @param {string} text
 * @param {string} source
 * @returns {unknown}
 */
export function parseText(text, source) {
  const p = new Parser(text, source);
  p.ws();
  const value = p.value(0);
  p.ws();
  if (p.i !== text.length) p.fail('data after the JSON value');
  return value;
}

class Parser {
  /** @param {string} text @param {string} source */
  constructor(text, source) {
    this.t = text;
    this.src = source;
    this.i = 0;
  }

  /** @param {string} rule @returns {never} */
  fail(rule) {
    throw new JsonError(`${this.src}: at character ${this.i}: ${rule}`);
  }

  ws() {
    const t = this.t;
    let i = this.i;
    while (i < t.length) {
      const c = t.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
  }

  /** @param {number} depth @returns {unknown} */
  value(depth) {
    const c = this.t[this.i];
    if (c === '{') return this.object(depth + 1);
    if (c === '[') return this.array(depth + 1);
    if (c === '"') return this.string();
    if (c === 't') return this.word('true', true);
    if (c === 'f') return this.word('false', false);
    if (c === 'n') return this.word('null', null);
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    if (c === undefined) this.fail('unexpected end of document');
    return this.fail(`unexpected character ${JSON.stringify(c)}`);
  }

  /** @param {string} w @param {unknown} v */
  word(w, v) {
    if (this.t.startsWith(w, this.i)) {
      this.i += w.length;
      return v;
    }
    return this.fail('invalid literal');
  }

  /** @param {number} depth */
  object(depth) {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH} levels`);
    this.i++;
    /** @type {Record<string, unknown>} */
    const out = {};
    this.ws();
    if (this.t[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.t[this.i] !== '"') this.fail('expected a string key');
      const key = this.string();
      if (Object.prototype.hasOwnProperty.call(out, key)) this.fail(`duplicate key ${JSON.stringify(key)}`);
      this.ws();
      if (this.t[this.i] !== ':') this.fail("expected ':'");
      this.i++;
      this.ws();
      const v = this.value(depth);
      // "__proto__" as a key is data: defined as an own property, never the prototype.
      if (key === '__proto__') Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      else out[key] = v;
      this.ws();
      const c = this.t[this.i];
      if (c === ',') {
        this.i++;
        continue;
      }
      if (c === '}') {
        this.i++;
        return out;
      }
      this.fail("expected ',' or '}'");
    }
  }

  /** @param {number} depth */
  array(depth) {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH} levels`);
    this.i++;
    const out = [];
    this.ws();
    if (this.t[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      out.push(this.value(depth));
      this.ws();
      const c = this.t[this.i];
      if (c === ',') {
        this.i++;
        continue;
      }
      if (c === ']') {
        this.i++;
        return out;
      }
      this.fail("expected ',' or ']'");
    }
  }

  /**
   * A string: scanned here, where every rule is checked (controls, escapes, surrogate
   * escapes in pairs), then, when it holds an escape, decoded by JSON.parse, whose
   * decoding of a checked literal is the contract's. Building the value here a piece
   * per escape kept a chain of pieces per string: 600 MB for 30 MB of escaped quotes.
   */
  string() {
    const t = this.t;
    const begin = this.i;
    let i = begin + 1;
    let escaped = false;
    for (;;) {
      if (i >= t.length) {
        this.i = i;
        this.fail('unterminated string');
      }
      const c = t.charCodeAt(i);
      if (c === 0x22) break;
      if (c < 0x20) {
        this.i = i;
        this.fail('control character in string');
      }
      // A raw surrogate can only be half of a pair here (the text came from UTF-8).
      if (c !== 0x5c) {
        i++;
        continue;
      }
      escaped = true;
      const e = t[i + 1];
      i += 2;
      if (e === 'u') {
        const cu = this.hex4(i);
        i += 4;
        if (cu >= 0xd800 && cu <= 0xdbff) {
          if (t[i] !== '\\' || t[i + 1] !== 'u') {
            this.i = i;
            this.fail('lone surrogate escape');
          }
          const lo = this.hex4(i + 2);
          if (lo < 0xdc00 || lo > 0xdfff) {
            this.i = i;
            this.fail('lone surrogate escape');
          }
          i += 6;
        } else if (cu >= 0xdc00 && cu <= 0xdfff) {
          this.i = i;
          this.fail('lone surrogate escape');
        }
      } else if (e === undefined || !SIMPLE_ESCAPES.includes(e)) {
        this.i = i - 1;
        this.fail('invalid escape');
      }
    }
    this.i = i + 1;
    return escaped ? JSON.parse(t.slice(begin, i + 1)) : t.slice(begin + 1, i);
  }

  /** @param {number} at */
  hex4(at) {
    const h = this.t.slice(at, at + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) {
      this.i = at;
      this.fail('invalid \\u escape');
    }
    return parseInt(h, 16);
  }

  number() {
    const t = this.t;
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(t);
    // A number is read within 4096 characters; a longer one is refused.
    if (!m || m[0] === '-' || m[0].length > MAX_NUMBER_CHARS) this.fail('invalid number');
    const text = m[0];
    const next = t[this.i + text.length];
    if (next !== undefined && /[0-9.eE+-]/.test(next)) this.fail('invalid number');
    const value = Number(text);
    if (!Number.isFinite(value)) this.fail(`number ${text.slice(0, 40)} is not finite`);
    if (m[1] === undefined && m[2] === undefined && (value > MAX_SAFE || value < -MAX_SAFE)) {
      this.fail(`integer ${text.slice(0, 40)} outside -(2^53-1)..(2^53-1)`);
    }
    this.i += text.length;
    return value;
  }
}

/**
 * An upper bound on the values and keys of a document, counted before parsing: its
 * commas, colons and opening brackets.
 * @param {Uint8Array} bytes
 */
export function valueBound(bytes) {
  // A table lookup per byte, not four comparisons: the bytes of every kept document
  // pass here, and the branches cost twice the lookup.
  let n = 1;
  for (let i = 0; i < bytes.length; i++) n += OPENS_VALUE[bytes[i]];
  return n;
}

/** 1 at ',' ':' '[' '{', else 0. */
const OPENS_VALUE = new Uint8Array(256);
for (const c of ',:[{') OPENS_VALUE[c.charCodeAt(0)] = 1;
