// @ts-check
/**
 * The case tree (SPEC 11.1): RFC 6962 Merkle tree hashing, and the inclusion-proof
 * check of RFC 9162 section 2.1.3.2.
 */

/** @typedef {import('./bagread.mjs').HashFactory} HashFactory */

/** @param {HashFactory} sha256 @param {Uint8Array[]} parts */
function digest(sha256, ...parts) {
  const h = sha256();
  for (const p of parts) h.update(p);
  return h.hex();
}

const LEAF = new Uint8Array([0]);
const NODE = new Uint8Array([1]);

const NIBBLE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) NIBBLE['0123456789abcdef'.charCodeAt(i)] = i;

/** @param {string} h 64 lowercase hex digits */
function bytes(h) {
  const out = new Uint8Array(h.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = (NIBBLE[h.charCodeAt(2 * i)] << 4) | NIBBLE[h.charCodeAt(2 * i + 1)];
  return out;
}

/** @param {HashFactory} sha256 @param {Uint8Array} leaf */
export function leafHash(sha256, leaf) {
  return digest(sha256, LEAF, leaf);
}

/** @param {HashFactory} sha256 @param {string} left @param {string} right */
export function nodeHash(sha256, left, right) {
  return digest(sha256, NODE, bytes(left), bytes(right));
}

/** Leaves appended in order; the root as 64 hex digits. */
export class TreeBuilder {
  /** @param {HashFactory} sha256 */
  constructor(sha256) {
    this.sha256 = sha256;
    /** @type {string[]} */
    this.leaves = [];
  }

  get size() {
    return this.leaves.length;
  }

  /** @param {Uint8Array} leaf */
  append(leaf) {
    this.leaves.push(leafHash(this.sha256, leaf));
  }

  root() {
    if (!this.leaves.length) return digest(this.sha256);
    return this.mth(0, this.leaves.length);
  }

  /** @param {number} lo @param {number} hi @returns {string} */
  mth(lo, hi) {
    const n = hi - lo;
    if (n === 1) return this.leaves[lo];
    let k = 1;
    while (k * 2 < n) k *= 2;
    return nodeHash(this.sha256, this.mth(lo, lo + k), this.mth(lo + k, hi));
  }

  /** The inclusion proof of leaf `m` (RFC 6962 PATH). @param {number} m */
  path(m) {
    /** @type {string[]} */
    const out = [];
    const walk = (/** @type {number} */ m, /** @type {number} */ lo, /** @type {number} */ hi) => {
      const n = hi - lo;
      if (n <= 1) return;
      let k = 1;
      while (k * 2 < n) k *= 2;
      if (m < k) {
        walk(m, lo, lo + k);
        out.push(this.mth(lo + k, hi));
      } else {
        walk(m - k, lo + k, hi);
        out.push(this.mth(lo, lo + k));
      }
    };
    walk(m, 0, this.leaves.length);
    return out;
  }
}

/**
 * The root an inclusion proof gives (RFC 9162 2.1.3.2), or null when the proof cannot
 * be one (index out of range, wrong length).
 * @param {HashFactory} sha256 @param {number} index @param {number} size
 * @param {string} leaf the leaf hash (hex) @param {string[]} path hex hashes
 */
export function rootFromPath(sha256, index, size, leaf, path) {
  if (!(index < size)) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(sha256, p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(sha256, r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}
