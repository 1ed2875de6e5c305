// @ts-check
/**
 * `verifyBundle(chunks, options)`: the library entry of the second verifier (SPEC 15).
 * It reads a `.tar.zst` archive from an async iterable of Uint8Array chunks (a Node
 * stream, `File.stream()`), hashing the archive as it goes, through the strict zstd and
 * tar layers into a bag, loads bundle.json, runs the claim groups of the bundle's
 * kind, checks every signature present, applies --strict and returns the verification
 * record of SPEC 5. It never throws for a bad bundle: an unreadable or unsafe archive
 * or a malformed bundle.json gives verdict "error" with its one-line reason.
 */
import { bagCollector } from './bagread.mjs';
import { ByteReader } from './bytereader.mjs';
import { applyStrict } from './claims.mjs';
import { InputError, JsonError } from './errors.mjs';
import { verifyEvalBanana } from './evalbanana.mjs';
import { verifyEvalBook } from './evalbook.mjs';
import { readTar } from './tar.mjs';
import { decompressFrame } from './zstd.mjs';
import { Ctx } from './verifyctx.mjs';
import { readText } from './util.mjs';
import { jsonText } from './json.mjs';
import { signatureClaims } from './signatures.mjs';
import { makeRecord, errorRecord } from './record.mjs';

export const DEFAULT_MAX_BYTES = 64 * 2 ** 30;
export const EVALBOOK_SCHEMA = 'evalbook.reproducibility_bundle.v1';
export const EB_SCHEMA = 'evalbook.eval_banana_bundle.v1';

/**
 * @typedef {{
 *   source: string,
 *   sha256: import('./bagread.mjs').HashFactory,
 *   sha256OneShot?: import('./bagread.mjs').OneShotHash,
 *   sha256Bytes?: import('./bagread.mjs').BytesHash,
 *   validators: Record<string, import('./schema.mjs').Validator>,
 *   verifyEd25519: (publicKey: Uint8Array, signature: Uint8Array, message: Uint8Array) => Promise<boolean>,
 *   sha512: (data: Uint8Array) => Promise<Uint8Array>,
 *   expectBundleDigest?: string|null, expectReportDigest?: string|null, strict?: boolean,
 *   maxBytes?: number, allowedSigners?: string|null, allowedSignersSource?: string, identity?: string|null,
 *   sidecars?: {name: string, text: Uint8Array, problem?: string|null}[], now?: () => string, tool?: {name: string, version: string},
 *   progress?: (bytes: number) => void,
 *   archiveSha256?: Promise<{sha256: string, size: number}>,
 *   collectGarbage?: () => void,
 * }} VerifyOptions
 *
 * `archiveSha256`: the archive's own SHA-256 and size computed apart from this thread
 * (the page hands each chunk, once read, to a worker that hashes it, in parallel with
 * this thread); without it the archive is hashed here as it passes. The size hashed
 * must be the size read, or the chunks hashed were not the chunks verified: that is an
 * error, not a record.
 *
 * `collectGarbage`: a full collection, where the host has one (Node's `gc`), called
 * after the stages that leave tens of megabytes behind (the archive read, bundle.json
 * read, the claims made): without it V8 grows the heap past them instead (SPEC 5's
 * memory bound on a bundle.json near its cap).
 */

/**
 * Verify one archive.
 * @param {AsyncIterable<Uint8Array>} chunks the archive's bytes; a chunk need stay valid
 *   only until the next is asked for (the source may read into one buffer)
 * @param {VerifyOptions} options
 */
export async function verifyBundle(chunks, options) {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const tap = tapArchive(chunks, options.archiveSha256 ? null : options.sha256, options.progress);
  /** @type {import('./bagread.mjs').Bag} */
  let bag;
  let bundle;
  try {
    const reader = new ByteReader(decompressFrame(tap, { source: options.source, maxBytes }));
    const collector = bagCollector(options.source, options.sha256, options.sha256OneShot, options.sha256Bytes);
    try {
      await readTar(reader, { source: options.source, maxBytes }, collector.visit);
    } finally {
      await collector.settle();
    }
    bag = collector.result();
    options.collectGarbage?.();
    bundle = loadBundle(bag, options);
    options.collectGarbage?.();
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    await tap.drain();
    return errorRecord(options, e.message, await archiveFacts(tap, options));
  }
  await tap.drain();
  const archive = await archiveFacts(tap, options);
  const ctx = new Ctx(bag, bundle.value, bundle.canonical, options, { sha256: options.sha256, sha256Bytes: options.sha256Bytes, validators: options.validators }, archive ? archive.sha256 : null);
  const facts = bundle.value.schema === EVALBOOK_SCHEMA ? verifyEvalBook(ctx) : verifyEvalBanana(ctx);
  const { signer, signatures } = await signatureClaims(ctx, options);
  const claims = applyStrict(ctx.claims.items, !!options.strict);
  options.collectGarbage?.();
  return makeRecord(options, { ...facts, schema: bundle.value.schema, signer, signatures, claims, archive });
}

/**
 * bundle.json parsed and schema-valid, and whether it is stored canonical; or
 * InputError (no verdict).
 * @param {import('./bagread.mjs').Bag} bag @param {VerifyOptions} options
 */
function loadBundle(bag, options) {
  const where = `${options.source}: data/bundle.json`;
  if (!bag.kept.has('data/bundle.json')) throw new InputError(`${where}: missing (no verdict possible)`);
  let value;
  let canonical;
  try {
    ({ value, canonical } = /** @type {{value: any, canonical: boolean}} */ (readText(takeText(bag, where), where, options.collectGarbage)));
  } catch (e) {
    if (e instanceof JsonError) throw new InputError(`malformed bundle.json: ${e.message}`);
    throw e;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InputError(`${where}: not a JSON object`);
  const name = value.schema === EVALBOOK_SCHEMA ? 'bundle' : value.schema === EB_SCHEMA ? 'eb-bundle' : null;
  if (name === null) throw new InputError(`${where}: unknown bundle schema ${JSON.stringify(value.schema) ?? 'undefined'}`);
  const problem = options.validators[name].problem(value);
  if (problem !== null) throw new InputError(`malformed bundle.json: ${where}: ${problem}`);
  return { value, canonical };
}

/**
 * bundle.json's text, its bytes dropped from the bag once decoded: they are not read
 * again (the bundle digest is the file's digest when it is stored canonical, and
 * whether it is, is known from the parse), and they are up to 32 MiB.
 * @param {import('./bagread.mjs').Bag} bag @param {string} where
 */
function takeText(bag, where) {
  const text = jsonText(/** @type {Uint8Array} */ (bag.kept.get('data/bundle.json')), where);
  bag.kept.delete('data/bundle.json');
  return text;
}

/**
 * The archive's SHA-256 and size once it is read to the end: the tap's own, or the one
 * computed apart when one was given (its size must be the tap's); null when the
 * archive could not be read to its end.
 * @param {ReturnType<typeof tapArchive>} tap @param {VerifyOptions} options
 * @returns {Promise<{sha256: string, size: number}|null>}
 */
async function archiveFacts(tap, options) {
  const own = tap.facts();
  if (own === null || !options.archiveSha256) return own;
  const other = await options.archiveSha256;
  if (other.size !== own.size) {
    throw new Error(`the archive hashed is not the archive read (${own.size} bytes verified, ${other.size} bytes hashed)`);
  }
  return { sha256: other.sha256, size: own.size };
}

/**
 * The archive bytes as they pass: hashed (unless `sha256` is null: another read hashes
 * them), counted, drained to the end on request.
 * @param {AsyncIterable<Uint8Array>} chunks @param {import('./bagread.mjs').HashFactory|null} sha256
 * @param {((n: number) => void)|undefined} progress
 */
function tapArchive(chunks, sha256, progress) {
  const it = chunks[Symbol.asyncIterator]();
  const h = sha256 === null ? null : sha256();
  let size = 0;
  let done = false;
  let failed = false;
  const next = async () => {
    try {
      const r = await it.next();
      if (r.done) done = true;
      else {
        if (h !== null) h.update(r.value);
        size += r.value.length;
        if (progress) progress(size);
      }
      return r;
    } catch (e) {
      failed = true;
      throw new InputError(`cannot read archive: ${/** @type {Error} */ (e).message}`);
    }
  };
  return {
    [Symbol.asyncIterator]() {
      return { next, return: async () => ({ done: true, value: undefined }) };
    },
    async drain() {
      try {
        while (!done && !failed) await next();
      } catch {
        failed = true;
      }
    },
    facts() {
      return done && !failed ? { sha256: h === null ? '' : h.hex(), size } : null;
    },
  };
}
