// @ts-check
/**
 * Reading a bag once, from the member stream of the tar reader: every file hashed,
 * the documents the claims read kept (tag files, bundle.json, the report, suite,
 * scorer files, manifests, check results, case files, evidence manifests, eval-banana
 * run files), example and payload bodies only hashed. The reader caps of
 * docs/format.md hold before anything kept is parsed.
 */
import { InputError } from './errors.mjs';
import { valueBound } from './json.mjs';

export const MAX_DOCUMENT_BYTES = 32 * 1024 * 1024;
export const MAX_KEPT_BYTES = 48 * 1024 * 1024;
export const MAX_JSON_VALUES = 2_000_000;
export const MAX_CASE_LINES = 20_000;
const MANIFEST_PREFIX = new TextEncoder().encode('{"check_id":');
const EMPTY = new Uint8Array(0);

/**
 * @typedef {{update(data: Uint8Array): void, hex(): string}} Hasher
 * @typedef {() => Hasher} HashFactory
 * @typedef {(data: Uint8Array) => Promise<string>} OneShotHash the hex SHA-256 of bytes
 *   held whole, read before it returns (WebCrypto's digest, in the page, copies them)
 * @typedef {(data: Uint8Array) => string} BytesHash the hex SHA-256 of bytes, at once
 * @typedef {{source: string, top: string, files: Map<string, {sha256: string, size: number}>,
 *   kept: Map<string, Uint8Array>, directories: Set<string>}} Bag
 */

/** @param {Uint8Array} head @param {Uint8Array} prefix */
function startsWith(head, prefix) {
  if (head.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (head[i] !== prefix[i]) return false;
  return true;
}

/** @param {string} rel @param {Uint8Array} first @param {number} size */
function keep(rel, first, size) {
  if (!rel.includes('/')) return true;
  if (!rel.startsWith('data/')) return false;
  if (rel.startsWith('data/datasets/') && rel.includes('/examples/')) return false;
  if (rel.startsWith('data/blobs/')) return startsWith(first, MANIFEST_PREFIX);
  if (rel.startsWith('data/run/')) return size <= MAX_DOCUMENT_BYTES;
  return true;
}

/**
 * A member of at most this many bytes is hashed whole by the one-shot hash, when one is
 * given; a larger one streams through the synchronous hasher.
 */
export const ONE_SHOT_MAX_BYTES = 16 * 1024 * 1024;
/**
 * A member smaller than this goes through the synchronous hasher even when a one-shot
 * hash is given: a call of the page's (WebCrypto, which in Chromium hashes on the
 * calling thread) costs 12-20 us besides the hashing, what hashing 1-2 KiB in
 * WebAssembly takes.
 */
export const ONE_SHOT_MIN_BYTES = 2 * 1024;
/** Bytes of members held for one-shot hashes not yet done; past it, reading waits. */
export const ONE_SHOT_PENDING_BYTES = 64 * 1024 * 1024;

/**
 * A visitor for readTar that fills a Bag; `settle()` waits for the one-shot hashes
 * still running, and must be awaited before the bag is read.
 * @param {string} source
 * @param {HashFactory} sha256
 * @param {OneShotHash} [sha256OneShot]
 * @param {BytesHash} [sha256Bytes] for a member that comes in one chunk (most do): under
 *   Node a hasher object per member costs as much as hashing a few KiB
 */
export function bagCollector(source, sha256, sha256OneShot, sha256Bytes) {
  /** @type {Bag | null} */
  let bag = null;
  let keptTotal = 0;
  let valuesTotal = 0;
  let linesTotal = 0;
  /** @type {{done: Promise<void>, bytes: number}[]} */
  const pending = [];
  let pendingBytes = 0;
  /** @type {unknown} */
  let hashFailure = null;
  let scratch = new Uint8Array(0);
  /** A view of `n` bytes (at most ONE_SHOT_MAX_BYTES) of the scratch buffer. @param {number} n */
  const scratchOf = (n) => {
    if (scratch.length < n) scratch = new Uint8Array(Math.min(ONE_SHOT_MAX_BYTES, Math.max(n, 2 * scratch.length)));
    return scratch.subarray(0, n);
  };
  const settleOldest = async () => {
    const first = /** @type {{done: Promise<void>, bytes: number}} */ (pending.shift());
    await first.done;
    pendingBytes -= first.bytes;
  };
  /** Waits while the one-shot hashes not yet done hold too many bytes. */
  const settleOver = async () => {
    while (pendingBytes > ONE_SHOT_PENDING_BYTES) await settleOldest();
  };
  // Synchronous unless a member must be iterated or one-shot hashes waited for: an async
  // call per member costs more than the work on a small one.
  /** @type {import('./tar.mjs').Visit} */
  const visit = (member, content) => {
    if (bag === null) {
      bag = { source, top: member.path, files: new Map(), kept: new Map(), directories: new Set() };
      return;
    }
    const into = bag;
    const rel = member.path.slice(into.top.length + 1);
    if (member.isDir) {
      into.directories.add(rel);
      return;
    }
    const refuse = (/** @type {string} */ rule) => new InputError(`${source}: ${member.path}: ${rule}`);
    const oneShot = sha256OneShot !== undefined && member.size >= ONE_SHOT_MIN_BYTES && member.size <= ONE_SHOT_MAX_BYTES;
    /** The member's hasher, made at its first chunk unless that chunk is all of it. @type {Hasher | null} */
    let h = null;
    /** @type {string | null} */
    let hexOfSingle = null;
    // The member's bytes for the one-shot hash (its size is bounded just above), when
    // they come in more than one chunk; a member in one chunk is hashed from it.
    /** @type {Uint8Array | null} */
    let whole = null;
    /** @type {Uint8Array | null} */
    let single = null;
    const countLines = rel.startsWith('data/') && rel.endsWith('.jsonl') && !rel.startsWith('data/run/');
    /** @type {Uint8Array[] | null} */
    let parts = null;
    let decided = false;
    // Copies of the first chunks while they are fewer bytes than the decision needs.
    /** @type {Uint8Array[]} */
    let head = [];
    let headSize = 0;
    let size = 0;
    let last = 0;
    /** @param {Uint8Array} first the member's first bytes, as many as the decision reads */
    const decide = (first) => {
      decided = true;
      if (!keep(rel, first, member.size)) return;
      if (member.size > MAX_DOCUMENT_BYTES) throw refuse(`document of ${member.size} bytes is over the ${MAX_DOCUMENT_BYTES}-byte cap`);
      if (keptTotal + member.size > MAX_KEPT_BYTES) throw refuse(`documents in the bundle exceed ${MAX_KEPT_BYTES} bytes in total`);
      keptTotal += member.size;
      parts = [];
    };
    // A chunk is valid only until the next is asked for: what is kept is copied.
    /** @param {Uint8Array} chunk */
    const take = (chunk) => {
      const at = size;
      // Once one chunk held the whole member, any chunk after it is empty.
      if (!oneShot && hexOfSingle === null) {
        if (h === null && sha256Bytes !== undefined && chunk.length === member.size) hexOfSingle = sha256Bytes(chunk);
        else (h ??= sha256()).update(chunk);
      }
      size += chunk.length;
      if (chunk.length) last = chunk[chunk.length - 1];
      if (countLines) {
        for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) linesTotal++;
        if (linesTotal > MAX_CASE_LINES) throw refuse(`more than ${MAX_CASE_LINES} case lines in the bundle's case files (limits.max_cases; refused before parsing)`);
      }
      if (decided) {
        if (parts !== null && !oneShot) parts.push(chunk.slice());
      } else if (headSize + chunk.length < MANIFEST_PREFIX.length) {
        head.push(chunk.slice());
        headSize += chunk.length;
      } else {
        decide(concatAll([...head, chunk.subarray(0, MANIFEST_PREFIX.length - headSize)]));
        if (parts !== null && !oneShot) parts.push(...head, chunk.slice());
        head = [];
      }
      // After the decision: a member that is not kept is put together in the collector's
      // one scratch buffer (the one-shot hash reads it before it returns), since a fresh
      // buffer costs a page fault every 4 KiB as it is first written.
      if (oneShot) {
        if (at === 0 && chunk.length === member.size) single = chunk;
        else (whole ??= decided && parts === null ? scratchOf(member.size) : new Uint8Array(member.size)).set(chunk, at);
      }
    };
    const finish = () => {
      if (!decided) {
        decide(concatAll(head));
        if (parts !== null && !oneShot) parts.push(...head);
      }
      if (countLines && size && last !== 0x0a) {
        linesTotal++;
        if (linesTotal > MAX_CASE_LINES) throw refuse(`more than ${MAX_CASE_LINES} case lines in the bundle's case files`);
      }
      // Kept bytes are taken before anything awaits: `single` is a view of the reader's chunk.
      if (parts) {
        // Every empty member shares one empty array: a bag of 65,000 empty evidence files
        // would otherwise hold 65,000 buffers of nothing.
        const data = size === 0 ? EMPTY : !oneShot ? concatAll(parts) : single !== null ? single.slice() : whole ?? EMPTY;
        if (rel.endsWith('.json') || rel.endsWith('.jsonl')) {
          valuesTotal += valueBound(data);
          if (valuesTotal > MAX_JSON_VALUES) throw refuse(`JSON documents in the bundle hold more than ${MAX_JSON_VALUES} values (refused before parsing)`);
        }
        into.kept.set(rel, data);
      }
      if (!oneShot) into.files.set(rel, { sha256: h !== null ? h.hex() : hexOfSingle ?? sha256().hex(), size });
      else {
        const entry = { sha256: '', size };
        into.files.set(rel, entry);
        const hashed = /** @type {OneShotHash} */ (sha256OneShot)(single ?? whole ?? new Uint8Array(0));
        const done = hashed.then(
          (hex) => {
            entry.sha256 = hex;
          },
          (e) => {
            hashFailure ??= e;
          },
        );
        pending.push({ done, bytes: size });
        pendingBytes += size;
        if (pendingBytes > ONE_SHOT_PENDING_BYTES) return settleOver();
      }
      return undefined;
    };
    if (member.size > 0) {
      // A small member the tar reader holds already comes whole, with no await.
      const all = content.whole();
      if (all === null) return iterate(content, take).then(finish);
      take(all);
    }
    return finish();
  };
  return {
    visit,
    /** Every one-shot hash done; a hash that failed is an error, not a digest. */
    async settle() {
      while (pending.length) await settleOldest();
      if (hashFailure !== null) throw new Error(`SHA-256 failed: ${/** @type {Error} */ (hashFailure).message}`);
    },
    /** @returns {Bag} */
    result() {
      if (bag === null) throw new InputError(`${source}: the archive holds no members`);
      return bag;
    },
  };
}

/** @param {AsyncIterable<Uint8Array>} content @param {(chunk: Uint8Array) => void} take */
async function iterate(content, take) {
  for await (const chunk of content) take(chunk);
}

/** @param {Uint8Array[]} parts */
export function concatAll(parts) {
  if (parts.length === 1) return parts[0];
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
