// @ts-check
/**
 * The Node services the core is given: SHA-256 from node:crypto, SHA-512 and Ed25519
 * through WebCrypto, the contract's JSON Schemas read from the repository's schemas/.
 * The only module of src/ that imports node: modules.
 */
import * as nodeCrypto from 'node:crypto';
import { createHash, webcrypto } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { validators } from './schema.mjs';
import { COUNTERSIGNATURE, MAX_LISTED, MAX_SIDECAR_BYTES, MAX_SIDECARS, ODD_NAME, orderSidecars, tooMany } from './signatures.mjs';

export const SCHEMA_NAMES = ['bundle', 'eb-bundle', 'report-body', 'envelope', 'suite', 'scorer', 'dataset-manifest', 'check-result', 'case', 'evidence-manifest', 'case-proof'];

/** @returns {import('./bagread.mjs').Hasher} */
export function sha256() {
  const h = createHash('sha256');
  return {
    update(d) {
      h.update(d);
    },
    hex() {
      return h.digest('hex');
    },
  };
}

/**
 * The hex SHA-256 of bytes at once: `crypto.hash` (Node 20.12 and later) makes no hasher
 * object, which costs more than hashing a small member; createHash where it is missing.
 * @type {import('./bagread.mjs').BytesHash}
 */
export const sha256Bytes =
  typeof (/** @type {any} */ (nodeCrypto).hash) === 'function'
    ? (data) => /** @type {any} */ (nodeCrypto).hash('sha256', data, 'hex')
    : (data) => createHash('sha256').update(data).digest('hex');

/** @param {Uint8Array} data */
export async function sha512(data) {
  return new Uint8Array(await webcrypto.subtle.digest('SHA-512', data));
}

/** @param {Uint8Array} key @param {Uint8Array} sig @param {Uint8Array} msg */
export async function verifyEd25519(key, sig, msg) {
  const k = await webcrypto.subtle.importKey('raw', key, { name: 'Ed25519' }, false, ['verify']);
  return webcrypto.subtle.verify('Ed25519', k, sig, msg);
}

/** @type {Record<string, import('./schema.mjs').Validator> | undefined} */
let cached;

/** The contract's schemas, read once from the repository. */
export function schemaValidators() {
  if (!cached) {
    /** @type {Record<string, any>} */
    const docs = {};
    for (const name of SCHEMA_NAMES) {
      const url = new URL(`../../schemas/${name}.schema.json`, import.meta.url);
      docs[name] = JSON.parse(readFileSync(fileURLToPath(url), 'utf8'));
    }
    cached = validators(docs);
  }
  return cached;
}

/**
 * The bytes of a file in 1 MiB chunks, read synchronously as they are asked for
 * (a read stream's buffering, events and thread-pool round trips cost more than the
 * reads; the verifier has nothing else to do while it waits). Every chunk is a view of
 * one buffer, valid until the next is asked for (verifyBundle's contract): a fresh
 * buffer for each read would cost a page fault every 4 KiB and the collector's attention.
 * Opening or reading fails as the read stream would, inside the iteration; so does a
 * path that is not a regular file once opened.
 * @param {string} path
 * @returns {AsyncGenerator<Uint8Array>}
 */
export async function* fileChunks(path) {
  // Opened without blocking and checked once open: a FIFO or device put at the path
  // after it was looked at would block the read or never end.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw new Error('not a regular file or directory');
    const buffer = new Uint8Array(CHUNK_BYTES);
    for (;;) {
      let n = 0;
      while (n < buffer.length) {
        const got = readSync(fd, buffer, n, buffer.length - n, null);
        if (got === 0) break;
        n += got;
      }
      if (n === 0) return;
      yield n === buffer.length ? buffer : buffer.subarray(0, n);
      if (n < buffer.length) return;
    }
  } finally {
    closeSync(fd);
  }
}
const CHUNK_BYTES = 1 << 20;

/** Everything verifyBundle needs from Node. */
export function nodeServices() {
  return { sha256, sha256Bytes, sha512, verifyEd25519, validators: schemaValidators() };
}

/**
 * The signatures beside a local archive (SPEC 11.3, 6), as the Python verifier finds
 * them: <archive>.sig, then <archive>.sig.<sha256 hex of its bytes> oldest first (by
 * status-change time, which no writer can set back), at most MAX_SIDECARS read, each
 * at most MAX_SIDECAR_BYTES, opened without following a link or blocking. Whatever
 * cannot be read, one too many, a name its bytes do not hash to, or a name like a
 * sidecar's that is neither form, comes back with its `problem`: listed, never
 * silently skipped, never an error that blocks the bundle.
 * @param {string} archive
 * @returns {{name: string, text: Uint8Array, problem: string|null}[]}
 */
export function localSidecars(archive) {
  const dir = dirname(archive);
  const base = basename(archive);
  const first = `${base}.sig`;
  /** @type {{name: string, time: bigint[]}[]} */
  const found = [];
  /** @type {string[]} */
  const odd = [];
  let unlisted = 0;
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  for (const name of names) {
    if (!name.startsWith(first)) continue;
    if (name !== first && !COUNTERSIGNATURE.test(name.slice(base.length))) {
      if (odd.length < MAX_SIDECARS) odd.push(name);
      continue;
    }
    if (found.length >= MAX_LISTED) {
      unlisted = 1;
      continue;
    }
    /** @type {bigint[]} */
    let time = [0n, 0n];
    try {
      const st = lstatSync(join(dir, name), { bigint: true });
      time = [st.ctimeNs, st.ino];
    } catch {
      time = [0n, 0n];
    }
    found.push({ name, time });
  }
  const ordered = orderSidecars(found, first);
  const rest = ordered.length - Math.min(ordered.length, MAX_SIDECARS) + unlisted;
  /** @type {{name: string, text: Uint8Array, problem: string|null}[]} */
  const out = ordered.slice(0, MAX_SIDECARS).map((name) => readSidecar(join(dir, name), name.slice(base.length)));
  if (rest) out.push({ name: join(dir, `${first}.*`), text: new Uint8Array(0), problem: tooMany(rest) });
  for (const name of odd.sort()) out.push({ name: join(dir, name), text: new Uint8Array(0), problem: ODD_NAME });
  return out;
}

/** @param {string} path @param {string} suffix */
function readSidecar(path, suffix) {
  const empty = new Uint8Array(0);
  let fd;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = /** @type {any} */ (e).code;
    // Never followed through a link, as the Python verifier reads sidecars.
    if (code === 'ELOOP') return { name: path, text: empty, problem: 'a symbolic link, not followed' };
    return { name: path, text: empty, problem: `cannot read (${code ?? e})` };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { name: path, text: empty, problem: 'not a regular file' };
    const buffer = new Uint8Array(MAX_SIDECAR_BYTES + 1);
    let size = 0;
    for (;;) {
      const n = readSync(fd, buffer, size, buffer.length - size, null);
      if (n === 0) break;
      size += n;
      if (size > MAX_SIDECAR_BYTES) return { name: path, text: empty, problem: `over the ${MAX_SIDECAR_BYTES}-byte cap for a signature (not read)` };
    }
    const text = buffer.slice(0, size);
    const named = COUNTERSIGNATURE.exec(suffix);
    if (named) {
      const actual = createHash('sha256').update(text).digest('hex');
      if (actual !== named[1]) return { name: path, text: empty, problem: `altered: its name records SHA-256 ${named[1]}, its bytes hash to ${actual}` };
    }
    return { name: path, text, problem: null };
  } catch (e) {
    const code = /** @type {any} */ (e).code;
    // Never followed through a link, as the Python verifier reads sidecars.
    if (code === 'ELOOP') return { name: path, text: empty, problem: 'a symbolic link, not followed' };
    return { name: path, text: empty, problem: `cannot read (${code ?? e})` };
  } finally {
    closeSync(fd);
  }
}
