// @ts-check
/**
 * The zstd layer of the archive reader (SPEC 4.1 and 5): exactly one zstd frame,
 * checked. The frame header is read here (magic, no skippable frame, content checksum
 * flag, no dictionary, window at most 8 MiB); the frame is decoded by zstd 1.5.7
 * compiled to WebAssembly (from the pinned zstddec package, src/zstd-wasm.mjs) through
 * its streaming API, every return code checked; output comes in pieces of at most
 * 128 KiB, counted against maxBytes; the content checksum is zstd's own check; input
 * that ends inside the frame, or goes on after it, is refused.
 *
 * A piece is a view of the decoder's memory, valid until the next piece is asked for
 * (not copying 128 KiB per piece halves the work outside zstd itself): a consumer that
 * keeps bytes copies them.
 */
import { InputError } from './errors.mjs';
import { ZSTD_WASM_BASE64 } from './zstd-wasm.mjs';

export const MAX_WINDOW_BYTES = 8 * 1024 * 1024;
const ZSTD_MAGIC = 0xfd2fb528;
const PIECE = 128 * 1024;
const BUNDLE_IS = 'a bundle is one POSIX ustar/pax tar in a single zstd frame, as export writes it';

const ERRORS = /** @type {Record<number, string>} */ ({
  10: 'unknown frame descriptor',
  12: 'unsupported zstd version',
  14: 'unsupported frame parameter',
  16: 'frame requires too much memory',
  20: 'corrupted block detected',
  22: 'content checksum does not match (corrupt data)',
  24: 'corrupted literals header',
  30: 'dictionary corrupted',
  32: 'dictionary mismatch',
  64: 'allocation error',
  70: 'destination buffer too small',
  72: 'source size wrong',
  80: 'no forward progress (destination full)',
  82: 'no forward progress (input empty)',
});

/** @type {Promise<any> | undefined} */
let instancePromise;

function wasmBytes() {
  const bin = atob(ZSTD_WASM_BASE64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The zstd WebAssembly instance's exports, instantiated once. */
export function zstdExports() {
  if (!instancePromise) {
    const imports = { env: { emscripten_notify_memory_growth: () => {} } };
    instancePromise = WebAssembly.instantiate(wasmBytes(), imports).then((r) => r.instance.exports);
  }
  return instancePromise;
}

/** @param {number} ret */
function isError(ret) {
  return ret >>> 0 > 0xffffffff - 120;
}

/** @param {number} ret */
function errorName(ret) {
  const code = -(ret | 0);
  return ERRORS[code] || `zstd error ${code}`;
}

/** @param {Uint8Array} head */
function whatFile(head) {
  /** @type {[number[], string][]} */
  const magics = [
    [[0x1f, 0x8b], 'this is a gzip file'],
    [[0x42, 0x5a, 0x68], 'this is a bzip2 file'],
    [[0xfd, 0x37, 0x7a, 0x58, 0x5a], 'this is an xz file'],
    [[0x50, 0x4b, 0x03, 0x04], 'this is a zip file'],
    [[0x7b], 'this looks like a JSON document'],
    [[0x5b], 'this looks like a JSON document'],
  ];
  for (const [m, what] of magics) {
    if (m.every((b, i) => head[i] === b)) return `${what}, not a zstd frame`;
  }
  const hex = Array.from(head.subarray(0, 4), (b) => b.toString(16).padStart(2, '0')).join('');
  return `not a zstd frame (magic ${hex}; ${BUNDLE_IS})`;
}

/**
 * Check a zstd frame header; returns nothing, throws InputError when refused.
 * @param {Uint8Array} h at least the whole header (up to 18 bytes) or all the input
 * @param {string} source
 */
export function checkFrameHeader(h, source) {
  const fail = (/** @type {string} */ rule) => new InputError(`${source}: zstd stream at byte 0: ${rule}`);
  if (h.length < 4) throw fail(h.length ? 'truncated zstd frame header' : 'empty input, not a bundle');
  const magic = (h[0] | (h[1] << 8) | (h[2] << 16) | (h[3] << 24)) >>> 0;
  if (magic >= 0x184d2a50 && magic <= 0x184d2a5f) throw fail('skippable frame (not allowed)');
  if (magic !== ZSTD_MAGIC) throw fail(whatFile(h));
  if (h.length < 5) throw fail('truncated zstd frame header');
  const fhd = h[4];
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  const reserved = (fhd >> 3) & 1;
  const checksum = (fhd >> 2) & 1;
  const dictFlag = fhd & 3;
  if (reserved) throw fail('reserved bit set in the frame header');
  if (dictFlag) throw fail('frame names a dictionary (not allowed)');
  if (!checksum) throw fail('frame without the content checksum flag');
  let pos = 5;
  let window = 0;
  if (!single) {
    if (h.length < 6) throw fail('truncated zstd frame header');
    const wd = h[5];
    const log = 10 + (wd >> 3);
    const base = 2 ** log;
    window = base + (base / 8) * (wd & 7);
    pos = 6;
  }
  const fcsBytes = [single ? 1 : 0, 2, 4, 8][fcsFlag];
  if (h.length < pos + fcsBytes) throw fail('truncated zstd frame header');
  if (single) {
    let size = 0;
    for (let i = fcsBytes - 1; i >= 0; i--) size = size * 256 + h[pos + i];
    if (fcsBytes === 2) size += 256;
    window = size;
  }
  if (window > MAX_WINDOW_BYTES) {
    throw fail(`window of ${window} bytes is over the 8 MiB limit (levels 1-19 stay within it)`);
  }
}

/**
 * Decompress the single zstd frame of `chunks`, yielding its content in pieces, each
 * valid until the next is asked for.
 * @param {AsyncIterable<Uint8Array>} chunks the compressed bytes, each chunk valid only
 *   until the next is asked for
 * @param {{source: string, maxBytes: number, pieceBytes?: number}} opts pieceBytes: the
 *   largest piece (128 KiB; smaller in tests, to cut documents and headers apart)
 * @returns {AsyncGenerator<Uint8Array>}
 */
export async function* decompressFrame(chunks, opts) {
  const { source, maxBytes } = opts;
  const z = await zstdExports();
  const fail = (/** @type {number} */ at, /** @type {string} */ rule) =>
    new InputError(`${source}: zstd stream at byte ${at}: ${rule}`);
  const iterator = chunks[Symbol.asyncIterator]();
  // The frame header first, gathered whole (at most 18 bytes) before anything is decoded.
  let pending = new Uint8Array(0);
  let ended = false;
  while (pending.length < 18 && !ended) {
    const r = await iterator.next();
    if (r.done) ended = true;
    // A chunk is valid only until the next is asked for: what waits for more is copied.
    else pending = concat(pending, r.value);
    if (pending.length < 18 && !ended) pending = pending.slice();
  }
  checkFrameHeader(pending, source);

  const inPtr = z.malloc(PIECE);
  const outSize = opts.pieceBytes ?? PIECE;
  const outPtr = z.malloc(outSize);
  const inStruct = z.malloc(12);
  const outStruct = z.malloc(12);
  const dctx = z.ZSTD_createDCtx();
  let consumed = 0;
  let produced = 0;
  let frameDone = false;
  try {
    /** @param {Uint8Array} data */
    const feed = function* (data) {
      for (let off = 0; off < data.length; off += PIECE) {
        const piece = data.subarray(off, off + PIECE);
        if (frameDone) {
          if (piece.length) throw fail(consumed, 'data after the zstd frame (extra frames or trailing bytes)');
          continue;
        }
        new Uint8Array(z.memory.buffer).set(piece, inPtr);
        let view = new DataView(z.memory.buffer);
        view.setUint32(inStruct, inPtr, true);
        view.setUint32(inStruct + 4, piece.length, true);
        view.setUint32(inStruct + 8, 0, true);
        for (;;) {
          view = new DataView(z.memory.buffer);
          view.setUint32(outStruct, outPtr, true);
          view.setUint32(outStruct + 4, outSize, true);
          view.setUint32(outStruct + 8, 0, true);
          const ret = z.ZSTD_decompressStream(dctx, outStruct, inStruct);
          view = new DataView(z.memory.buffer);
          const inPos = view.getUint32(inStruct + 8, true);
          if (isError(ret)) throw fail(consumed + inPos, errorName(ret));
          const outPos = view.getUint32(outStruct + 8, true);
          if (outPos) {
            produced += outPos;
            if (produced > maxBytes) {
              throw fail(consumed + inPos, `more than max_bytes=${maxBytes} decompressed bytes (the --max-bytes cap; raise it to read a larger bundle)`);
            }
            yield new Uint8Array(z.memory.buffer, outPtr, outPos);
          }
          if (ret === 0) {
            frameDone = true;
            if (inPos < piece.length) {
              throw fail(consumed + inPos, 'data after the zstd frame (extra frames or trailing bytes)');
            }
            break;
          }
          if (inPos >= piece.length && outPos < outSize) break;
        }
        consumed += piece.length;
      }
    };
    yield* feed(pending);
    pending = new Uint8Array(0);
    while (!ended) {
      const r = await iterator.next();
      if (r.done) break;
      yield* feed(r.value);
    }
    if (!frameDone) throw fail(consumed, 'truncated zstd stream (the frame does not end)');
  } finally {
    z.ZSTD_freeDCtx(dctx);
    z.free(inPtr);
    z.free(outPtr);
    z.free(inStruct);
    z.free(outStruct);
    if (iterator.return) await iterator.return();
  }
}

/** @param {Uint8Array} a @param {Uint8Array} b */
export function concat(a, b) {
  if (!a.length) return b;
  if (!b.length) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
