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
    /** @type {((v: unknown, at: string|null) => string|null)|null} the checking function, made on first use */
    this.fn = null;
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
    return fnOf(s)(v, at);
  }
}

/** @typedef {(v: unknown, at: string|null) => string|null} Check */

/** @type {Check} */
const VALID = () => null;

/**
 * The checking function of a node, made once: a chain of the steps its keywords need,
 * in the order of the keywords' checks, each step testing only what its keyword reads
 * (a schema node of a few keywords is then a few calls, not a walk over every keyword).
 * @param {Node} s
 * @returns {Check}
 */
function fnOf(s) {
  if (s.fn !== null) return s.fn;
  // A node reached again while its steps are made (a recursive $ref) calls through.
  /** @type {Check} */
  let impl = VALID;
  s.fn = (v, at) => impl(v, at);
  impl = buildFn(s);
  s.fn = impl;
  return impl;
}

/** @param {Node} s @returns {Check} */
function buildFn(s) {
  if (s.bool !== null) return s.bool ? VALID : (v, at) => (at === null ? FAIL : `${at}: not allowed here`);
  /** @type {Check[]} */
  const steps = [];
  if (s.ref !== null) {
    const ref = s.ref;
    steps.push((v, at) => fnOf(ref)(v, at));
  }
  if (s.types !== null) {
    const types = s.types;
    steps.push((v, at) => {
      for (const t of types) if (hasType(v, t)) return null;
      return at === null ? FAIL : `${at}: ${shown(v)} is not of type ${types.join(' or ')}`;
    });
  }
  if (s.hasConst) {
    const c = s.const;
    steps.push((v, at) => (jsonEqual(c, v) ? null : at === null ? FAIL : `${at}: must be ${shown(c)}`));
  }
  if (s.enum !== null) {
    const e = s.enum;
    const plain = e.every((x) => x === null || typeof x !== 'object');
    steps.push((v, at) => {
      if (plain) {
        // Scalars only: JSON equality is identity (no value equals an object here).
        for (let i = 0; i < e.length; i++) if (e[i] === v) return null;
      } else {
        for (let i = 0; i < e.length; i++) if (jsonEqual(e[i], v)) return null;
      }
      return at === null ? FAIL : `${at}: ${shown(v)} is not one of ${shown(e)}`;
    });
  }
  const min = s.minLength;
  const max = s.maxLength;
  const regex = s.regex;
  const pattern = s.pattern;
  if (min !== undefined || max !== undefined || regex !== null) {
    steps.push((v, at) => {
      if (typeof v !== 'string') return null;
      // A string of n UTF-16 units holds between n/2 and n code points: count them
      // only when a bound falls inside that range.
      if ((min !== undefined && v.length / 2 < min) || (max !== undefined && v.length > max)) {
        const n = codePoints(v);
        if (min !== undefined && n < min) return at === null ? FAIL : `${at}: shorter than ${min}`;
        if (max !== undefined && n > max) return at === null ? FAIL : `${at}: longer than ${max}`;
      }
      if (regex !== null && !regex.test(v)) return at === null ? FAIL : `${at}: ${shown(v)} does not match ${pattern}`;
      return null;
    });
  }
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = s;
  if (minimum !== undefined || maximum !== undefined || exclusiveMinimum !== undefined || exclusiveMaximum !== undefined) {
    steps.push((v, at) => {
      if (typeof v !== 'number') return null;
      if (minimum !== undefined && v < minimum) return at === null ? FAIL : `${at}: ${v} is less than ${minimum}`;
      if (maximum !== undefined && v > maximum) return at === null ? FAIL : `${at}: ${v} is more than ${maximum}`;
      if (exclusiveMinimum !== undefined && v <= exclusiveMinimum) return at === null ? FAIL : `${at}: ${v} is not more than ${exclusiveMinimum}`;
      if (exclusiveMaximum !== undefined && v >= exclusiveMaximum) return at === null ? FAIL : `${at}: ${v} is not less than ${exclusiveMaximum}`;
      return null;
    });
  }
  const { maxItems, minItems, uniqueItems } = s;
  const items = s.items === null ? null : s.items;
  const contains = s.contains === null ? null : s.contains;
  if (maxItems !== undefined || minItems !== undefined || items !== null || contains !== null || uniqueItems) {
    steps.push((v, at) => {
      if (!Array.isArray(v)) return null;
      if (maxItems !== undefined && v.length > maxItems) return at === null ? FAIL : `${at}: more than ${maxItems} items`;
      if (minItems !== undefined && v.length < minItems) return at === null ? FAIL : `${at}: fewer than ${minItems} items`;
      if (items !== null) {
        const f = fnOf(items);
        for (let i = 0; i < v.length; i++) {
          const p = f(v[i], at === null ? null : `${at}[${i}]`);
          if (p) return p;
        }
      }
      if (contains !== null) {
        const f = fnOf(contains);
        let found = false;
        for (let i = 0; i < v.length && !found; i++) found = f(v[i], null) === null;
        if (!found) return at === null ? FAIL : `${at}: no item matches what it must contain`;
      }
      if (uniqueItems) {
        const keys = new Set();
        for (const x of v) {
          const key = uniqueKey(x);
          if (keys.has(key)) return at === null ? FAIL : `${at}: items are not unique`;
          keys.add(key);
        }
      }
      return null;
    });
  }
  const required = s.required;
  const noAdditional = s.noAdditional;
  const additional = s.additionalProperties;
  const propertyNames = s.propertyNames;
  if (required !== null || s.properties.size || noAdditional || additional !== null || propertyNames !== null) {
    /** @type {Map<string, Node>} */
    const props = s.properties;
    steps.push((v, at) => {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return null;
      const o = /** @type {Record<string, unknown>} */ (v);
      if (required !== null) {
        for (const k of required) if (!Object.prototype.hasOwnProperty.call(o, k)) return at === null ? FAIL : `${at}: '${k}' is a required property`;
      }
      for (const k of Object.keys(o)) {
        const sub = props.get(k);
        if (sub !== undefined) {
          const p = fnOf(sub)(o[k], at === null ? null : `${at}.${k}`);
          if (p) return p;
        } else if (noAdditional) {
          return at === null ? FAIL : `${at}: additional property ${shown(k)} is not allowed`;
        } else if (additional !== null) {
          const p = fnOf(additional)(o[k], at === null ? null : `${at}.${k}`);
          if (p) return p;
        }
        if (propertyNames !== null) {
          const p = fnOf(propertyNames)(k, at === null ? null : `${at} key ${shown(k)}`);
          if (p) return p;
        }
      }
      return null;
    });
  }
  if (s.allOf !== null) {
    const subs = s.allOf;
    steps.push((v, at) => {
      for (const sub of subs) {
        const p = fnOf(sub)(v, at);
        if (p) return p;
      }
      return null;
    });
  }
  if (s.anyOf !== null) {
    const subs = s.anyOf;
    steps.push((v, at) => {
      let last = null;
      for (const sub of subs) {
        const p = fnOf(sub)(v, at);
        if (!p) return null;
        last = p;
      }
      return last ?? (at === null ? FAIL : `${at}: matches none of anyOf`);
    });
  }
  if (s.oneOf !== null) {
    const subs = s.oneOf;
    steps.push((v, at) => {
      let n = 0;
      for (const sub of subs) if (fnOf(sub)(v, null) === null) n++;
      return n === 1 ? null : at === null ? FAIL : `${at}: must match exactly one of oneOf`;
    });
  }
  if (s.not !== null) {
    const not = s.not;
    steps.push((v, at) => (fnOf(not)(v, null) === null ? (at === null ? FAIL : `${at}: matches what it must not`) : null));
  }
  if (s.if !== null) {
    const cond = s.if;
    const then = s.then;
    const otherwise = s.else;
    steps.push((v, at) => {
      if (fnOf(cond)(v, null) === null) return then !== null ? fnOf(then)(v, at) : null;
      return otherwise !== null ? fnOf(otherwise)(v, at) : null;
    });
  }
  if (steps.length === 0) return VALID;
  if (steps.length === 1) return steps[0];
  if (steps.length === 2) {
    const [a, b] = steps;
    return (v, at) => a(v, at) || b(v, at);
  }
  return (v, at) => {
    for (let i = 0; i < steps.length; i++) {
      const p = steps[i](v, at);
      if (p) return p;
    }
    return null;
  };
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
