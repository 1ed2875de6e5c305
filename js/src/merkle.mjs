// @ts-check
/**
 * The case tree (SPEC 11.1): RFC 6962 Merkle tree hashing, and the inclusion-proof
 * check of RFC 9162 section 2.1.3.2.
 */

/** @typedef {import('./bagread.mjs').HashFactory} HashFactory @typedef {import('./bagread.mjs').BytesHash} BytesHash */

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
  hexInto(h, out, 0);
  return out;
}

/** @param {string} h lowercase hex digits @param {Uint8Array} out @param {number} at */
function hexInto(h, out, at) {
  for (let i = 0, n = h.length >> 1; i < n; i++) out[at + i] = (NIBBLE[h.charCodeAt(2 * i)] << 4) | NIBBLE[h.charCodeAt(2 * i + 1)];
}

/** @param {HashFactory} sha256 @param {Uint8Array} leaf */
export function leafHash(sha256, leaf) {
  return digest(sha256, LEAF, leaf);
}

/** @param {HashFactory} sha256 @param {string} left @param {string} right */
export function nodeHash(sha256, left, right) {
  return digest(sha256, NODE, bytes(left), bytes(right));
}

/**
 * Leaves appended in order; the root as 64 hex digits. With `sha256Bytes` (a hash of
 * bytes at once), each leaf and node is hashed from one buffer: a tree of 20,000 cases
 * hashes 40,000 times, and a hasher object costs more than hashing one case line.
 */
export class TreeBuilder {
  /** @param {HashFactory} sha256 @param {BytesHash} [sha256Bytes] */
  constructor(sha256, sha256Bytes) {
    this.sha256 = sha256;
    this.sha256Bytes = sha256Bytes;
    /** @type {string[]} */
    this.leaves = [];
    /** 0x00 and a leaf, for sha256Bytes (grown as needed) */
    this.leafBuffer = new Uint8Array(1024);
    /** 0x01 and two hashes, for sha256Bytes */
    this.nodeBuffer = new Uint8Array(65);
    this.nodeBuffer[0] = 1;
  }

  get size() {
    return this.leaves.length;
  }

  /** @param {Uint8Array} leaf */
  append(leaf) {
    const once = this.sha256Bytes;
    if (once === undefined) {
      this.leaves.push(leafHash(this.sha256, leaf));
      return;
    }
    if (this.leafBuffer.length < leaf.length + 1) this.leafBuffer = new Uint8Array(Math.max(leaf.length + 1, 2 * this.leafBuffer.length));
    const buf = this.leafBuffer;
    buf[0] = 0;
    buf.set(leaf, 1);
    this.leaves.push(once(buf.subarray(0, leaf.length + 1)));
  }

  /** @param {string} left @param {string} right */
  node(left, right) {
    const once = this.sha256Bytes;
    if (once === undefined) return nodeHash(this.sha256, left, right);
    const buf = this.nodeBuffer;
    hexInto(left, buf, 1);
    hexInto(right, buf, 33);
    return once(buf);
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
    return this.node(this.mth(lo, lo + k), this.mth(lo + k, hi));
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
