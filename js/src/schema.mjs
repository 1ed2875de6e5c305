// @ts-check
/**
 * A JSON Schema (draft 2020-12) validator for the keywords the contract's schemas use
 * (schemas/*.schema.json): type, enum, const, pattern (ECMA-262), lengths in code
 * points, numeric bounds, properties / required / additionalProperties /
 * propertyNames, items / contains / maxItems / uniqueItems, allOf / anyOf / not,
 * if / then / else, and local $ref. A keyword it does not know is refused when the
 * schema is loaded, so a schema it cannot hold is never half-checked.
 */

const KNOWN = new Set([
  '$schema', '$id', '$defs', '$ref', 'title', 'description', 'type', 'enum', 'const', 'pattern',
  'minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum',
  'properties', 'required', 'additionalProperties', 'propertyNames', 'items', 'contains',
  'maxItems', 'minItems', 'uniqueItems', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else',
]);

/** @typedef {Record<string, any>} Schema */

/**
 * JSON equality: numbers by value, no coercion between types, objects by members.
 * @param {unknown} a @param {unknown} b
 * @returns {boolean}
 */
export function jsonEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  const ao = /** @type {Record<string, unknown>} */ (a);
  const bo = /** @type {Record<string, unknown>} */ (b);
  const ak = Object.keys(ao);
  if (ak.length !== Object.keys(bo).length) return false;
  return ak.every((k) => Object.prototype.hasOwnProperty.call(bo, k) && jsonEqual(ao[k], bo[k]));
}

/** @param {unknown} v */
function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'boolean';
  return 'object';
}

/** @param {unknown} v @param {string} t */
function hasType(v, t) {
  const actual = typeOf(v);
  if (t === 'integer') return actual === 'number' && Number.isInteger(v);
  return actual === t;
}

/** @param {unknown} v */
function shown(v) {
  const text = JSON.stringify(v);
  return text === undefined ? String(v) : text.length > 60 ? text.slice(0, 57) + '...' : text;
}

/**
 * A schema node with every keyword in a fixed place, read once when the schema is
 * loaded: checking a document then reads the same shape for every node (the keyword
 * lookups on the schema documents themselves, each of its own shape, dominated).
 */
class Node {
  constructor() {
    /** @type {boolean|null} true or false for a boolean schema */
    this.bool = null;
    /** @type {Node|null} */
    this.ref = null;
    /** @type {string[]|null} */
    this.types = null;
    this.hasConst = false;
    /** @type {unknown} */
    this.const = undefined;
    /** @type {unknown[]|null} */
    this.enum = null;
    /** @type {number|undefined} */
    this.minLength = undefined;
    /** @type {number|undefined} */
    this.maxLength = undefined;
    /** @type {string|undefined} */
    this.pattern = undefined;
    /** @type {RegExp|null} */
    this.regex = null;
    /** @type {number|undefined} */
    this.minimum = undefined;
    /** @type {number|undefined} */
    this.maximum = undefined;
    /** @type {number|undefined} */
    this.exclusiveMinimum = undefined;
    /** @type {number|undefined} */
    this.exclusiveMaximum = undefined;
    /** @type {number|undefined} */
    this.maxItems = undefined;
    /** @type {number|undefined} */
    this.minItems = undefined;
    /** @type {Node|null} */
    this.items = null;
    /** @type {Node|null} */
    this.contains = null;
    this.uniqueItems = false;
    /** @type {string[]|null} */
    this.required = null;
    /** @type {Map<string, Node>} */
    this.properties = new Map();
    /** @type {Node|null} */
    this.additionalProperties = null;
    this.noAdditional = false;
    /** @type {Node|null} */
    this.propertyNames = null;
    /** @type {Node[]|null} */
    this.allOf = null;
    /** @type {Node[]|null} */
    this.anyOf = null;
    /** @type {Node[]|null} */
    this.oneOf = null;
    /** @type {Node|null} */
    this.not = null;
    /** @type {Node|null} */
    this.if = null;
    /** @type {Node|null} */
    this.then = null;
    /** @type {Node|null} */
    this.else = null;
  }
}

/** The number of code points of a string (a lone surrogate counts as one). @param {string} v */
function codePoints(v) {
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < v.length) {
      const d = v.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/**
 * What a failed check returns when no message is asked for (`at` is null): the
 * document is checked once without building paths and messages, and once more with
 * them only when it fails, so the message is the one a single full check gives.
 */
const FAIL = 'invalid';

export class Validator {
  /** @param {Schema} root */
  constructor(root) {
    this.root = root;
    /** @type {Map<string, Node>} */
    this.refs = new Map();
    /** @type {Map<object, Node>} */
    this.nodes = new Map();
    this.checkKeywords(root);
    this.top = this.compile(root);
  }

  /** @param {any} s */
  checkKeywords(s) {
    if (typeof s !== 'object' || s === null) return;
    if (Array.isArray(s)) return s.forEach((x) => this.checkKeywords(x));
    for (const [k, v] of Object.entries(s)) {
      if (!KNOWN.has(k)) throw new Error(`schema keyword ${k} is not supported`);
      if (k === 'properties' || k === '$defs') Object.values(v).forEach((x) => this.checkKeywords(x));
      else if (k !== 'enum' && k !== 'const') this.checkKeywords(v);
    }
  }

  /**
   * The node of a schema (object or boolean), made once per schema object; a $ref is
   * compiled where it points, so recursive references share their node.
   * @param {Schema | boolean} s
   * @returns {Node}
   */
  compile(s) {
    const node = new Node();
    if (s === true || s === false) {
      node.bool = s;
      return node;
    }
    const known = this.nodes.get(s);
    if (known !== undefined) return known;
    this.nodes.set(s, node);
    if (s.$ref !== undefined) node.ref = this.resolve(s.$ref);
    if (s.type !== undefined) node.types = Array.isArray(s.type) ? s.type : [s.type];
    if (s.const !== undefined) {
      node.hasConst = true;
      node.const = s.const;
    }
    if (s.enum !== undefined) node.enum = s.enum;
    node.minLength = s.minLength;
    node.maxLength = s.maxLength;
    if (s.pattern !== undefined) {
      node.pattern = s.pattern;
      node.regex = new RegExp(s.pattern, 'u');
    }
    node.minimum = s.minimum;
    node.maximum = s.maximum;
    node.exclusiveMinimum = s.exclusiveMinimum;
    node.exclusiveMaximum = s.exclusiveMaximum;
    node.maxItems = s.maxItems;
    node.minItems = s.minItems;
    if (s.items !== undefined) node.items = this.compile(s.items);
    if (s.contains !== undefined) node.contains = this.compile(s.contains);
    node.uniqueItems = s.uniqueItems === true;
    if (s.required !== undefined) node.required = s.required;
    for (const [k, sub] of Object.entries(s.properties || {})) node.properties.set(k, this.compile(sub));
    if (s.additionalProperties === false) node.noAdditional = true;
    else if (s.additionalProperties !== undefined) node.additionalProperties = this.compile(s.additionalProperties);
    if (s.propertyNames !== undefined) node.propertyNames = this.compile(s.propertyNames);
    if (s.allOf !== undefined) node.allOf = s.allOf.map((/** @type {Schema} */ x) => this.compile(x));
    if (s.anyOf !== undefined) node.anyOf = s.anyOf.map((/** @type {Schema} */ x) => this.compile(x));
    if (s.oneOf !== undefined) node.oneOf = s.oneOf.map((/** @type {Schema} */ x) => this.compile(x));
    if (s.not !== undefined) node.not = this.compile(s.not);
    if (s.if !== undefined) node.if = this.compile(s.if);
    if (s.then !== undefined) node.then = this.compile(s.then);
    if (s.else !== undefined) node.else = this.compile(s.else);
    return node;
  }

  /**
   * The first problem of `value` against the schema, or null when it is valid.
   * @param {unknown} value
   * @returns {string | null}
   */
  problem(value) {
    if (this.check(this.top, value, null) === null) return null;
    return this.check(this.top, value, '$');
  }

  /** @param {string} ref */
  resolve(ref) {
    const hit = this.refs.get(ref);
    if (hit !== undefined) return hit;
    const found = this.compile(this.lookup(ref));
    this.refs.set(ref, found);
    return found;
  }

  /** @param {string} ref */
  lookup(ref) {
    if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref}`);
    /** @type {any} */
    let s = this.root;
    for (const part of ref.slice(2).split('/')) s = s[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    if (s === undefined) throw new Error(`unresolved $ref ${ref}`);
    return s;
  }

  /**
   * The first problem of `v` against `s`: a message under the path `at`, or FAIL when
   * `at` is null (no message wanted); null when valid.
   * @param {Node} s @param {unknown} v @param {string|null} at
   * @returns {string | null}
   */
  check(s, v, at) {
    if (s.bool !== null) return s.bool ? null : at === null ? FAIL : `${at}: not allowed here`;
    if (s.ref !== null) {
      const p = this.check(s.ref, v, at);
      if (p) return p;
    }
    if (s.types !== null) {
      let ok = false;
      for (const t of s.types) {
        if (hasType(v, t)) {
          ok = true;
          break;
        }
      }
      if (!ok) return at === null ? FAIL : `${at}: ${shown(v)} is not of type ${s.types.join(' or ')}`;
    }
    if (s.hasConst && !jsonEqual(s.const, v)) return at === null ? FAIL : `${at}: must be ${shown(s.const)}`;
    if (s.enum !== null) {
      let ok = false;
      for (const e of s.enum) {
        if (jsonEqual(e, v)) {
          ok = true;
          break;
        }
      }
      if (!ok) return at === null ? FAIL : `${at}: ${shown(v)} is not one of ${shown(s.enum)}`;
    }
    if (typeof v === 'string') {
      if (s.minLength !== undefined || s.maxLength !== undefined) {
        // A string of n UTF-16 units holds between n/2 and n code points: count them
        // only when a bound falls inside that range.
        const min = s.minLength;
        const max = s.maxLength;
        if ((min !== undefined && v.length / 2 < min) || (max !== undefined && v.length > max)) {
          const n = codePoints(v);
          if (min !== undefined && n < min) return at === null ? FAIL : `${at}: shorter than ${min}`;
          if (max !== undefined && n > max) return at === null ? FAIL : `${at}: longer than ${max}`;
        }
      }
      if (s.regex !== null && !s.regex.test(v)) return at === null ? FAIL : `${at}: ${shown(v)} does not match ${s.pattern}`;
    }
    if (typeof v === 'number') {
      if (s.minimum !== undefined && v < s.minimum) return at === null ? FAIL : `${at}: ${v} is less than ${s.minimum}`;
      if (s.maximum !== undefined && v > s.maximum) return at === null ? FAIL : `${at}: ${v} is more than ${s.maximum}`;
      if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return at === null ? FAIL : `${at}: ${v} is not more than ${s.exclusiveMinimum}`;
      if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) return at === null ? FAIL : `${at}: ${v} is not less than ${s.exclusiveMaximum}`;
    }
    if (Array.isArray(v)) {
      if (s.maxItems !== undefined && v.length > s.maxItems) return at === null ? FAIL : `${at}: more than ${s.maxItems} items`;
      if (s.minItems !== undefined && v.length < s.minItems) return at === null ? FAIL : `${at}: fewer than ${s.minItems} items`;
      if (s.items !== null) {
        for (let i = 0; i < v.length; i++) {
          const p = this.check(s.items, v[i], at === null ? null : `${at}[${i}]`);
          if (p) return p;
        }
      }
      if (s.contains !== null) {
        let found = false;
        for (let i = 0; i < v.length && !found; i++) found = this.check(s.contains, v[i], null) === null;
        if (!found) return at === null ? FAIL : `${at}: no item matches what it must contain`;
      }
      if (s.uniqueItems) {
        const keys = new Set();
        for (const x of v) {
          const key = uniqueKey(x);
          if (keys.has(key)) return at === null ? FAIL : `${at}: items are not unique`;
          keys.add(key);
        }
      }
    }
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const o = /** @type {Record<string, unknown>} */ (v);
      if (s.required !== null) {
        for (const k of s.required) if (!Object.prototype.hasOwnProperty.call(o, k)) return at === null ? FAIL : `${at}: '${k}' is a required property`;
      }
      const props = s.properties;
      for (const k of Object.keys(o)) {
        const sub = props.get(k);
        if (sub !== undefined) {
          const p = this.check(sub, o[k], at === null ? null : `${at}.${k}`);
          if (p) return p;
        } else if (s.noAdditional) {
          return at === null ? FAIL : `${at}: additional property ${shown(k)} is not allowed`;
        } else if (s.additionalProperties !== null) {
          const p = this.check(s.additionalProperties, o[k], at === null ? null : `${at}.${k}`);
          if (p) return p;
        }
        if (s.propertyNames !== null) {
          const p = this.check(s.propertyNames, k, at === null ? null : `${at} key ${shown(k)}`);
          if (p) return p;
        }
      }
    }
    if (s.allOf !== null) {
      for (const sub of s.allOf) {
        const p = this.check(sub, v, at);
        if (p) return p;
      }
    }
    if (s.anyOf !== null) {
      let last = null;
      let matched = false;
      for (const sub of s.anyOf) {
        const p = this.check(sub, v, at);
        if (!p) {
          matched = true;
          break;
        }
        last = p;
      }
      if (!matched) return last ?? (at === null ? FAIL : `${at}: matches none of anyOf`);
    }
    if (s.oneOf !== null) {
      let n = 0;
      for (const sub of s.oneOf) if (this.check(sub, v, null) === null) n++;
      if (n !== 1) return at === null ? FAIL : `${at}: must match exactly one of oneOf`;
    }
    if (s.not !== null && this.check(s.not, v, null) === null) return at === null ? FAIL : `${at}: matches what it must not`;
    if (s.if !== null) {
      if (this.check(s.if, v, null) === null) {
        if (s.then !== null) {
          const p = this.check(s.then, v, at);
          if (p) return p;
        }
      } else if (s.else !== null) {
        const p = this.check(s.else, v, at);
        if (p) return p;
      }
    }
    return null;
  }
}

/** A key under which two JSON values collide exactly when JSON-equal. @param {unknown} v @returns {string} */
function uniqueKey(v) {
  if (Array.isArray(v)) return `[${v.map(uniqueKey).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = /** @type {Record<string, unknown>} */ (v);
    return `{${Object.keys(o).sort().map((k) => JSON.stringify(k) + ':' + uniqueKey(o[k])).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'undefined';
}

/**
 * Validators for the named schemas.
 * @param {Record<string, Schema>} schemas name (e.g. "bundle") -> schema document
 */
export function validators(schemas) {
  /** @type {Record<string, Validator>} */
  const out = {};
  for (const [name, s] of Object.entries(schemas)) out[name] = new Validator(s);
  return out;
}
