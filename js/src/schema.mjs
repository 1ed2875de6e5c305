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

export class Validator {
  /** @param {Schema} root */
  constructor(root) {
    this.root = root;
    /** @type {Map<string, RegExp>} */
    this.regex = new Map();
    /** @type {Map<string, any>} */
    this.refs = new Map();
    this.checkKeywords(root);
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
   * The first problem of `value` against the schema, or null when it is valid.
   * @param {unknown} value
   * @returns {string | null}
   */
  problem(value) {
    return this.check(this.root, value, '$');
  }

  /** @param {string} ref */
  resolve(ref) {
    const hit = this.refs.get(ref);
    if (hit !== undefined) return hit;
    const found = this.lookup(ref);
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

  /** @param {string} p */
  re(p) {
    let r = this.regex.get(p);
    if (!r) {
      r = new RegExp(p, 'u');
      this.regex.set(p, r);
    }
    return r;
  }

  /**
   * @param {Schema | boolean} s @param {unknown} v @param {string} at
   * @returns {string | null}
   */
  check(s, v, at) {
    if (s === true) return null;
    if (s === false) return `${at}: not allowed here`;
    if (s.$ref !== undefined) {
      const p = this.check(this.resolve(s.$ref), v, at);
      if (p) return p;
    }
    if (s.type !== undefined) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      if (!types.some((/** @type {string} */ t) => hasType(v, t))) return `${at}: ${shown(v)} is not of type ${types.join(' or ')}`;
    }
    if (s.const !== undefined && !jsonEqual(s.const, v)) return `${at}: must be ${shown(s.const)}`;
    if (s.enum !== undefined && !s.enum.some((/** @type {unknown} */ e) => jsonEqual(e, v))) {
      return `${at}: ${shown(v)} is not one of ${shown(s.enum)}`;
    }
    if (typeof v === 'string') {
      const n = s.minLength !== undefined || s.maxLength !== undefined ? [...v].length : 0;
      if (s.minLength !== undefined && n < s.minLength) return `${at}: shorter than ${s.minLength}`;
      if (s.maxLength !== undefined && n > s.maxLength) return `${at}: longer than ${s.maxLength}`;
      if (s.pattern !== undefined && !this.re(s.pattern).test(v)) return `${at}: ${shown(v)} does not match ${s.pattern}`;
    }
    if (typeof v === 'number') {
      if (s.minimum !== undefined && v < s.minimum) return `${at}: ${v} is less than ${s.minimum}`;
      if (s.maximum !== undefined && v > s.maximum) return `${at}: ${v} is more than ${s.maximum}`;
      if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return `${at}: ${v} is not more than ${s.exclusiveMinimum}`;
      if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) return `${at}: ${v} is not less than ${s.exclusiveMaximum}`;
    }
    if (Array.isArray(v)) {
      if (s.maxItems !== undefined && v.length > s.maxItems) return `${at}: more than ${s.maxItems} items`;
      if (s.minItems !== undefined && v.length < s.minItems) return `${at}: fewer than ${s.minItems} items`;
      if (s.items !== undefined) {
        for (let i = 0; i < v.length; i++) {
          const p = this.check(s.items, v[i], `${at}[${i}]`);
          if (p) return p;
        }
      }
      if (s.contains !== undefined && !v.some((x, i) => this.check(s.contains, x, `${at}[${i}]`) === null)) {
        return `${at}: no item matches what it must contain`;
      }
      if (s.uniqueItems === true) {
        const keys = new Set();
        for (const x of v) {
          const key = uniqueKey(x);
          if (keys.has(key)) return `${at}: items are not unique`;
          keys.add(key);
        }
      }
    }
    if (typeOf(v) === 'object') {
      const o = /** @type {Record<string, unknown>} */ (v);
      if (s.required !== undefined) {
        for (const k of s.required) if (!Object.prototype.hasOwnProperty.call(o, k)) return `${at}: '${k}' is a required property`;
      }
      const props = s.properties || {};
      for (const k of Object.keys(o)) {
        if (Object.prototype.hasOwnProperty.call(props, k)) {
          const p = this.check(props[k], o[k], `${at}.${k}`);
          if (p) return p;
        } else if (s.additionalProperties !== undefined) {
          if (s.additionalProperties === false) return `${at}: additional property ${shown(k)} is not allowed`;
          const p = this.check(s.additionalProperties, o[k], `${at}.${k}`);
          if (p) return p;
        }
        if (s.propertyNames !== undefined) {
          const p = this.check(s.propertyNames, k, `${at} key ${shown(k)}`);
          if (p) return p;
        }
      }
    }
    if (s.allOf !== undefined) {
      for (const sub of s.allOf) {
        const p = this.check(sub, v, at);
        if (p) return p;
      }
    }
    if (s.anyOf !== undefined) {
      const problems = [];
      for (const sub of s.anyOf) {
        const p = this.check(sub, v, at);
        if (!p) break;
        problems.push(p);
      }
      if (problems.length === s.anyOf.length) return problems[problems.length - 1] ?? `${at}: matches none of anyOf`;
    }
    if (s.oneOf !== undefined) {
      const n = s.oneOf.filter((/** @type {Schema} */ sub) => this.check(sub, v, at) === null).length;
      if (n !== 1) return `${at}: must match exactly one of oneOf`;
    }
    if (s.not !== undefined && this.check(s.not, v, at) === null) return `${at}: matches what it must not`;
    if (s.if !== undefined) {
      if (this.check(s.if, v, at) === null) {
        if (s.then !== undefined) {
          const p = this.check(s.then, v, at);
          if (p) return p;
        }
      } else if (s.else !== undefined) {
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
