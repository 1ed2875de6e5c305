// @ts-check
/**
 * The page's verification, on whichever thread runs it (SPEC 15): the core's
 * `verifyBundle` over a File read in slices, with the archive hashed by one worker and
 * members by another (each falling back to this thread), and what comes out of it: the
 * record, written as a JSON Blob for saving (`recordBlob`), and the view the page shows
 * (`viewOf`), which is all that ever reaches the page's own thread when a verifying
 * worker runs this (page/verifier.mjs).
 */
import { sha256 as nobleSha256 } from '@noble/hashes/sha2';
import { createSHA256 } from 'hash-wasm';
import { verifyBundle } from '../src/verify.mjs';
import { validators } from '../src/schema.mjs';
import { recordPieces } from '../src/record.mjs';
import { shownClipped } from '../src/textsafe.mjs';
import { GROUPS } from '../src/claims.mjs';
import bundle from '../../schemas/bundle.schema.json';
import ebBundle from '../../schemas/eb-bundle.schema.json';
import reportBody from '../../schemas/report-body.schema.json';
import envelope from '../../schemas/envelope.schema.json';
import suite from '../../schemas/suite.schema.json';
import scorer from '../../schemas/scorer.schema.json';
import datasetManifest from '../../schemas/dataset-manifest.schema.json';
import checkResult from '../../schemas/check-result.schema.json';
import caseSchema from '../../schemas/case.schema.json';
import evidenceManifest from '../../schemas/evidence-manifest.schema.json';
import caseProof from '../../schemas/case-proof.schema.json';

const VALIDATORS = validators({
  bundle, 'eb-bundle': ebBundle, 'report-body': reportBody, envelope, suite, scorer,
  'dataset-manifest': datasetManifest, 'check-result': checkResult, case: caseSchema,
  'evidence-manifest': evidenceManifest, 'case-proof': caseProof,
});

/**
 * SHA-256 instances of hash-wasm (WebAssembly, streaming, several times faster than
 * JavaScript), kept in a pool: the verifier hashes the archive and one member at a time,
 * then many small documents; a hasher goes back to the pool once its digest is read.
 * When the pool is empty the synchronous @noble/hashes takes over.
 * @type {any[]}
 */
const POOL = [];

export async function fillPool() {
  for (let i = POOL.length; i < 4; i++) POOL.push(await createSHA256());
}

/** @returns {import('../src/bagread.mjs').Hasher} */
function sha256() {
  const fast = POOL.pop();
  if (fast) {
    fast.init();
    return {
      update(d) {
        fast.update(d);
      },
      hex() {
        const out = fast.digest('hex');
        POOL.push(fast);
        return out;
      },
    };
  }
  const h = nobleSha256.create();
  return {
    update(d) {
      h.update(d);
    },
    hex() {
      const b = h.digest();
      let s = '';
      for (let i = 0; i < b.length; i++) s += b[i].toString(16).padStart(2, '0');
      return s;
    },
  };
}

/**
 * The SHA-256 of a member held whole, by WebCrypto: native code (SHA extensions where
 * the processor has them) on the browser's own threads, several times faster than any
 * hash in WebAssembly. Only the archive itself, too large to hold, streams through
 * hash-wasm.
 * @param {Uint8Array} data
 */
async function sha256OneShot(data) {
  const b = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
  let s = '';
  for (let i = 0; i < b.length; i++) s += HEX[b[i]];
  return s;
}
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** @param {Uint8Array} data */
async function sha512(data) {
  return new Uint8Array(await crypto.subtle.digest('SHA-512', data));
}

/** @param {Uint8Array} key @param {Uint8Array} sig @param {Uint8Array} msg */
async function verifyEd25519(key, sig, msg) {
  const k = await crypto.subtle.importKey('raw', key, { name: 'Ed25519' }, false, ['verify']);
  return crypto.subtle.verify('Ed25519', k, sig, msg);
}

/** The source of page/member-worker.mjs, put here by build.mjs. */
/* global __MEMBER_WORKER_SOURCE__ */
/** @type {string} */
// @ts-ignore
const MEMBER_WORKER_SOURCE = __MEMBER_WORKER_SOURCE__;

/** Members are copied into batches of this many bytes (a larger member goes alone). */
const MEMBER_BATCH_BYTES = 4 * 1024 * 1024;

/** The members' hasher of the run in progress, ended when the run ends or is forgotten. @type {Worker|null} */
let memberWorker = null;

/** A watch over a worker's answers ticks once a second while work is outstanding. */
const SILENCE_TICK_MS = 1000;
/**
 * A worker with work outstanding that sends nothing for this many ticks in a row has
 * stopped: it closed itself or died with no error event, which nothing else reports.
 * A live one answers within a fraction of a second (a 4 MiB batch or slice).
 */
const SILENT_TICKS = 10;

/**
 * A watch over a worker that may stop without a word: `heard()` on each of its messages,
 * `busy(b)` whenever work goes out to it or comes back; after SILENT_TICKS ticks in a
 * row with work outstanding and nothing heard, `onSilent()` (once). A tick that comes
 * late (this thread was busy, and the worker's messages may be queued behind it) starts
 * the count again: only silence this thread was free to hear counts.
 * @param {() => void} onSilent
 */
function silenceWatch(onSilent) {
  /** @type {ReturnType<typeof setInterval>|null} */
  let timer = null;
  let quiet = 0;
  let lastTick = 0;
  const stop = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
  };
  const tick = () => {
    const now = performance.now();
    const late = now - lastTick > 2 * SILENCE_TICK_MS;
    lastTick = now;
    quiet = late ? 0 : quiet + 1;
    if (quiet >= SILENT_TICKS) {
      stop();
      onSilent();
    }
  };
  return {
    heard() {
      quiet = 0;
    },
    /** @param {boolean} outstanding */
    busy(outstanding) {
      if (!outstanding) stop();
      else if (timer === null) {
        quiet = 0;
        lastTick = performance.now();
        timer = setInterval(tick, SILENCE_TICK_MS);
      }
    },
    stop,
  };
}

/**
 * The one-shot SHA-256 of members (2 KiB to 16 MiB, bagread's bounds) in a worker, so
 * that the verifying thread does not hash them: WebCrypto in Chromium hashes on the
 * thread that calls it. Each member is copied into a batch at once (the bytes given are
 * a view valid only until the call returns), a full batch is transferred to the worker
 * (no second copy) and comes back with the digests, to be filled again; the rest goes
 * when this thread next waits (a zero-delay timer), which it does whenever bagread
 * waits for the digests: bagread bounds the bytes awaiting a digest (64 MiB), so the
 * batches in flight are bounded too. Until the worker says it runs, and for good where
 * no worker can start (the constructor throws, or a policy refuses it after, with an
 * error event), WebCrypto on this thread: no member is ever sent to a worker that never ran.
 * @returns {import('../src/bagread.mjs').OneShotHash}
 */
function memberHasher() {
  let worker;
  const url = URL.createObjectURL(new Blob([MEMBER_WORKER_SOURCE], { type: 'text/javascript' }));
  try {
    worker = new Worker(url);
  } catch {
    URL.revokeObjectURL(url);
    return sha256OneShot;
  }
  memberWorker = worker;
  /** 'starting' until the worker's first message, then 'running'; 'refused' if it never ran. */
  let state = 'starting';
  /** @typedef {{resolve: (hex: string) => void, reject: (e: Error) => void}} Job */
  /** @type {Map<number, Job[]>} */
  const sent = new Map();
  let nextId = 0;
  /** @type {Error|null} */
  let failure = null;
  /** @type {Uint8Array|null} */
  let batch = null;
  let used = 0;
  /** @type {number[]} */
  let spans = [];
  /** @type {Job[]} */
  let jobs = [];
  let timer = false;
  const fail = (/** @type {Error} */ e) => {
    failure ??= e;
    watch.stop();
    for (const js of sent.values()) for (const j of js) j.reject(failure);
    sent.clear();
    for (const j of jobs) j.reject(failure);
    jobs = [];
    spans = [];
    used = 0;
  };
  /** Batches back from the worker, filled again rather than allocated. @type {Uint8Array[]} */
  const spare = [];
  const watch = silenceWatch(() => {
    worker.terminate();
    fail(new Error('the member hashing worker stopped answering'));
  });
  worker.onmessage = (e) => {
    watch.heard();
    if (e.data && e.data.ready === true) {
      state = 'running';
      return;
    }
    const { id, digests, error, buffer } = e.data ?? {};
    if (buffer instanceof ArrayBuffer && buffer.byteLength === MEMBER_BATCH_BYTES && spare.length < 4) spare.push(new Uint8Array(buffer));
    const js = sent.get(id);
    if (js === undefined) return;
    sent.delete(id);
    watch.busy(sent.size > 0);
    if (!Array.isArray(digests) || digests.length !== js.length) {
      const err = new Error(`the member hashing worker failed: ${error ?? 'no digests'}`);
      for (const j of js) j.reject(err);
      return;
    }
    js.forEach((j, i) => j.resolve(digests[i]));
  };
  worker.onerror = (e) => {
    e.preventDefault();
    if (state === 'starting') {
      // It never ran, so it holds no member: hash here from now on.
      state = 'refused';
      worker.terminate();
      URL.revokeObjectURL(url);
      if (memberWorker === worker) memberWorker = null;
      return;
    }
    fail(new Error('the member hashing worker failed'));
  };
  const flush = () => {
    timer = false;
    if (batch === null || !jobs.length) return;
    if (failure !== null) {
      fail(failure);
      return;
    }
    const id = nextId++;
    sent.set(id, jobs);
    watch.busy(true);
    worker.postMessage({ id, buffer: batch.buffer, spans }, [batch.buffer]);
    batch = null;
    used = 0;
    spans = [];
    jobs = [];
  };
  return (data) => {
    if (state !== 'running') return sha256OneShot(data);
    return new Promise((resolve, reject) => {
      if (failure !== null) {
        reject(failure);
        return;
      }
      if (batch !== null && used + data.length > batch.length) flush();
      batch ??= data.length <= MEMBER_BATCH_BYTES ? spare.pop() ?? new Uint8Array(MEMBER_BATCH_BYTES) : new Uint8Array(data.length);
      batch.set(data, used);
      spans.push(used, data.length);
      used += data.length;
      jobs.push({ resolve, reject });
      if (!timer) {
        timer = true;
        setTimeout(flush, 0);
      }
    });
  };
}

/** The hashing workers of the run in progress (or of one forgotten) ended. */
export function endWorkers() {
  if (memberWorker !== null) {
    memberWorker.terminate();
    memberWorker = null;
  }
  if (hashWorker !== null) {
    hashWorker.terminate();
    hashWorker = null;
  }
}

/** The source of page/hash-worker.mjs, put here by build.mjs. */
/* global __HASH_WORKER_SOURCE__ */
/** @type {string} */
// @ts-ignore
const HASH_WORKER_SOURCE = __HASH_WORKER_SOURCE__;

/** The worker hashing the archive of the run in progress, ended when the run is forgotten. @type {Worker|null} */
let hashWorker = null;

/**
 * The archive's SHA-256 and size, from the very slices this thread reads: each is
 * transferred (not copied) to a worker once the zstd layer is done with it, so this
 * thread neither hashes the archive nor reads it twice. Slices are held here until the
 * worker says it runs; where no worker can start (the constructor throws, or a policy
 * refuses it after, with an error event), they are hashed here, from the first. `take(slice)`
 * hands over a slice (a promise to wait for when 32 MiB already wait), `take(null)` ends.
 * @returns {{take: (slice: Uint8Array|null) => Promise<void>|void, result: Promise<{sha256: string, size: number}>}}
 */
function archiveHasher() {
  /** @type {Worker|null} */
  let worker = null;
  const url = URL.createObjectURL(new Blob([HASH_WORKER_SOURCE], { type: 'text/javascript' }));
  try {
    worker = new Worker(url);
  } catch {
    URL.revokeObjectURL(url);
  }
  /** @type {(v: {sha256: string, size: number}) => void} */
  let resolveResult = () => {};
  /** @type {(e: Error) => void} */
  let rejectResult = () => {};
  const result = /** @type {Promise<{sha256: string, size: number}>} */ (
    new Promise((resolve, reject) => {
      resolveResult = resolve;
      rejectResult = reject;
    })
  );
  result.catch(() => {});
  /** The hash on this thread, once no worker can be used. @type {{update: (b: Uint8Array) => void, hex: () => string}|null} */
  let here = null;
  let hereSize = 0;
  /** @param {Uint8Array|null} slice */
  const hashHere = (slice) => {
    here ??= sha256();
    if (slice === null) resolveResult({ sha256: here.hex(), size: hereSize });
    else {
      here.update(slice);
      hereSize += slice.length;
    }
  };
  if (worker === null) return { take: hashHere, result };
  const w = worker;
  hashWorker = w;
  let running = false;
  /** Slices (and the end, null) taken before the worker said it runs. @type {(Uint8Array|null)[]} */
  let early = [];
  // Bytes taken and not yet hashed, bounded: past the bound, reading waits.
  let waiting = 0;
  /** @type {(() => void)[]} */
  let held = [];
  const release = () => {
    const go = held;
    held = [];
    for (const f of go) f();
  };
  const end = () => {
    watch.stop();
    w.terminate();
    URL.revokeObjectURL(url);
    if (hashWorker === w) hashWorker = null;
    waiting = 0;
    release();
  };
  let endSent = false;
  // Work is outstanding while a slice sent is not acknowledged, or the end not answered.
  const watch = silenceWatch(() => {
    end();
    rejectResult(new Error('the hashing worker stopped answering'));
  });
  /** @param {Uint8Array|null} slice */
  const send = (slice) => {
    watch.busy(true);
    // A slice is its own ArrayBuffer (slicesOf reads each apart), so it is transferred whole.
    if (slice === null) {
      endSent = true;
      w.postMessage({ end: true });
    } else w.postMessage({ slice: slice.buffer }, [slice.buffer]);
  };
  w.onmessage = (e) => {
    watch.heard();
    if (e.data && e.data.ready === true) {
      running = true;
      const go = early;
      early = [];
      for (const slice of go) send(slice);
      return;
    }
    if (e.data && typeof e.data.hashed === 'number') {
      waiting -= e.data.hashed;
      watch.busy(waiting > 0 || endSent);
      if (waiting <= ARCHIVE_WAITING_BYTES) release();
      return;
    }
    end();
    if (e.data && typeof e.data.sha256 === 'string') resolveResult(e.data);
    else rejectResult(new Error(`hashing the archive failed: ${e.data && e.data.error}`));
  };
  w.onerror = (e) => {
    e.preventDefault();
    const wasRunning = running;
    running = false;
    end();
    if (wasRunning) {
      rejectResult(new Error('the hashing worker failed'));
      return;
    }
    // It never ran, so it holds nothing: what was held here is hashed here, and the rest.
    const go = early;
    early = [];
    for (const slice of go) hashHere(slice);
    here ??= sha256();
  };
  return {
    take(slice) {
      if (here !== null) return hashHere(slice);
      if (!running) {
        early.push(slice);
        if (slice === null) return;
        waiting += slice.length;
      } else {
        send(slice);
        if (slice === null) return;
        waiting += slice.length;
      }
      if (waiting > ARCHIVE_WAITING_BYTES && hashWorker === w) return new Promise((resolve) => held.push(() => resolve(undefined)));
    },
    result,
  };
}

/** At most this many bytes of the archive wait for the hashing worker. */
const ARCHIVE_WAITING_BYTES = 32 * 1024 * 1024;

/** The archive is read in slices of this many bytes, the next read while one is checked. */
const SLICE_BYTES = 4 * 1024 * 1024;

/**
 * The bytes of a File in 4 MiB slices, each read (`Blob.arrayBuffer`) while the one
 * before is being checked: File.stream() hands out chunks of 64 KiB, each a round of
 * promises on the verifying thread. A file that changes while it is read fails the read.
 * When the next slice is asked for, the one before goes to `done` (verifyBundle's
 * contract: a chunk need stay valid only until then), and null after the last.
 * @param {File} file @param {(slice: Uint8Array|null) => Promise<void>|void} done
 */
async function* slicesOf(file, done) {
  /** @param {number} at */
  const readAt = (at) => file.slice(at, Math.min(file.size, at + SLICE_BYTES)).arrayBuffer();
  let at = 0;
  let next = file.size > 0 ? readAt(0) : null;
  while (next !== null) {
    const buf = new Uint8Array(await next);
    if (buf.length !== Math.min(SLICE_BYTES, file.size - at)) throw new Error(`${file.name} changed while it was read`);
    at += buf.length;
    next = at < file.size ? readAt(at) : null;
    next?.catch(() => {});
    yield buf;
    await done(buf);
  }
  await done(null);
}

/** The record's JSON is written in strings of about this many characters (young ones). */
const SAVE_PIECE_CHARS = 1 << 13;
/** ...into one buffer of this many bytes, which becomes a Blob each time it is full. */
const SAVE_BUFFER_BYTES = 1 << 20;

/**
 * The verification record as a JSON Blob, built so that this page never holds it: the
 * JSON is written in small strings (short-lived, collected as it goes), each encoded
 * into one reused 1 MiB buffer; each full buffer is copied into a Blob of its own, whose
 * bytes the browser takes to its side while this page waits a turn, and the record's
 * Blob is made of those. The record of a hostile bundle is 150 MB and more of JSON:
 * gathered here as one string, a stream read into one blob, or megabyte strings (which
 * only a full collection frees), it took the tab past 600 MB right after a
 * verification, whose garbage is still there.
 * @param {any} r @returns {Promise<Blob>}
 */
export async function recordBlob(r) {
  const encoder = new TextEncoder();
  const buffer = new Uint8Array(SAVE_BUFFER_BYTES);
  /** @type {Blob[]} */
  const parts = [];
  let used = 0;
  const flush = async () => {
    parts.push(new Blob([buffer.subarray(0, used)]));
    used = 0;
    await new Promise((resolve) => setTimeout(resolve, 0));
  };
  /** @param {string} piece */
  const write = async (piece) => {
    let rest = piece;
    for (;;) {
      const { read, written } = encoder.encodeInto(rest, buffer.subarray(used));
      used += written;
      if (read === rest.length) return;
      rest = rest.slice(read);
      await flush();
    }
  };
  for (const piece of recordPieces(r, SAVE_PIECE_CHARS)) await write(piece);
  await write('\n');
  if (used) await flush();
  return new Blob(parts, { type: 'application/json' });
}

/**
 * The inputs of one verification, as the form gave them (checked there).
 * @typedef {{file: File, signers: string|null, signersName: string|null, identity: string|null, expect: string|null}} Inputs
 */

/**
 * Verify the bundle of `inputs` on this thread: the verification record, with the input
 * checked and the exit code the Node command would give (SPEC 7; the page has no
 * --strict). `progress(n)` hears the archive bytes read so far. Throws what stopped it.
 * @param {Inputs} inputs @param {(n: number) => void} progress
 */
export async function verifyFile(inputs, progress) {
  const { file } = inputs;
  const archive = archiveHasher();
  const members = memberHasher();
  // This run's workers, ended when it ends: never those of a later run on this thread.
  const mine = [hashWorker, memberWorker];
  try {
    const record = await verifyBundle(slicesOf(file, archive.take), {
      source: file.name, sha256, sha256OneShot: members, sha512, verifyEd25519, validators: VALIDATORS,
      archiveSha256: archive.result,
      expectBundleDigest: inputs.expect, allowedSigners: inputs.signers, allowedSignersSource: inputs.signersName ?? undefined,
      identity: inputs.identity, progress,
    });
    record.input = file.name;
    record.exit_code = record.verdict === 'verified' ? 0 : record.verdict === 'failed' ? 1 : 3;
    return record;
  } finally {
    for (const w of mine) {
      w?.terminate();
      if (hashWorker === w) hashWorker = null;
      if (memberWorker === w) memberWorker = null;
    }
  }
}

// Failed claims shown one by one, at most (as the auditor's page of SPEC 14 lists them):
// a hostile bundle of 62 KB gives 40,000 failed claims, and a page element for each
// took the tab past 1.8 GB and never finished drawing. The counts by group are whole.
export const MAX_LISTED_CLAIMS = 1000;
// ...and at most this many characters of them as shown (escapes included): a thousand
// claims of 8 KB (names of 540 characters, each in several fields) cost the tab 170 MB
// to lay out, and a second such page before the first was collected took it past 600
// MB. The first failed claim is always listed.
export const MAX_LISTED_CHARS = 1 << 19;
// Each field of a listed claim shows at most this many characters as shown (the
// console's cut, at a larger limit): its first and last halves, the cut marked.
export const MAX_FIELD_CHARS = 4096;
const PAGE_CUT = ' ... (cut: the saved record gives it whole) ... ';

/**
 * A field of a listed claim as the page shows it: through the one escaping function,
 * cut as above; null stays null.
 * @param {unknown} v @returns {string|null}
 */
function shownField(v) {
  return v === null || v === undefined ? null : shownClipped(v, MAX_FIELD_CHARS, PAGE_CUT);
}

/**
 * What the page shows of a record: its facts, the counts of its claims by group and
 * state, its first failed claims (within the bounds above; their fields already shown,
 * escaped and cut) and how many failed in all; never the claims themselves (a hostile
 * bundle's are 150 MB and more).
 * @param {any} r
 */
export function viewOf(r) {
  /** @type {Record<string, {proven: number, unprovable: number, failed: number}>} */
  const byGroup = {};
  /** @type {any[]} */
  const failed = [];
  let failedCount = 0;
  let listedChars = 0;
  let listing = true;
  const claims = Array.isArray(r.claims) ? r.claims : [];
  for (const c of claims) {
    const g = (byGroup[String(c.group)] ??= { proven: 0, unprovable: 0, failed: 0 });
    if (c.state === 'proven' || c.state === 'unprovable' || c.state === 'failed') g[/** @type {'proven'|'unprovable'|'failed'} */ (c.state)]++;
    if (c.state !== 'failed') continue;
    failedCount++;
    if (!listing) continue;
    const shown = { group: c.group, group_name: c.group_name, subject: shownField(c.subject), detail: shownField(c.detail), path: shownField(c.path), expected: shownField(c.expected), observed: shownField(c.observed) };
    let chars = 0;
    for (const v of [shown.subject, shown.detail, shown.path, shown.expected, shown.observed]) chars += v === null ? 0 : v.length;
    if (failed.length && (failed.length >= MAX_LISTED_CLAIMS || listedChars + chars > MAX_LISTED_CHARS)) {
      listing = false;
      continue;
    }
    listedChars += chars;
    failed.push(shown);
  }
  const groups = Object.keys(GROUPS)
    .filter((g) => byGroup[g] !== undefined)
    .map((g) => ({ group: `${g} ${GROUPS[Number(g)]}`, ...byGroup[g] }));
  /** @type {Record<string, unknown>} */
  const summary = {};
  for (const [k, v] of Object.entries(r.summary ?? {})) if (typeof v !== 'object') summary[k] = v;
  return {
    verdict: r.verdict, error: r.error ?? null, counts: r.counts, strict_forecast: r.strict_forecast ?? null,
    anchor: r.anchor, report_id: r.report_id, report_digest: r.report_digest, report_result: r.report_result,
    report_issued_at: r.report_issued_at, bundle_digest: r.bundle_digest, bundle_schema: r.bundle_schema,
    envelope: r.envelope ?? null, summary, groups, failed, failed_count: failedCount, claims_count: claims.length,
    unprovable_by_reason: r.unprovable_by_reason ?? {}, signatures: r.signatures ?? [], tool: r.tool,
    verified_at: r.verified_at, archive: r.archive ?? null, input: r.input, exit_code: r.exit_code,
  };
}
