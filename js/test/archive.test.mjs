import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { verifyBundle } from '../src/verify.mjs';
import { nodeServices } from '../src/node.mjs';
import { decompressFrame } from '../src/zstd.mjs';
import { ByteReader } from '../src/bytereader.mjs';
import { readTar } from '../src/tar.mjs';
import { bagCollector } from '../src/bagread.mjs';
import { createHash } from 'node:crypto';

const CLEAN = new Uint8Array(readFileSync(new URL('./data/rpt-clean.tar.zst', import.meta.url)));

/** The bytes in chunks cut at random places (a seeded generator, so failures repeat). */
function* chunked(data, seed, max) {
  let x = seed;
  let i = 0;
  while (i < data.length) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const n = 1 + (x % max);
    yield data.subarray(i, i + n);
    i += n;
  }
}
async function* asAsync(it) {
  for (const c of it) yield c;
}
/**
 * The chunks as views of one buffer, overwritten with 0xAA and refilled when the next is
 * asked for (as the Node command reads a file): a reader that keeps a chunk past that
 * reads garbage.
 */
async function* reused(it) {
  const buffer = new Uint8Array(4096);
  for (const c of it) {
    buffer.fill(0xaa);
    buffer.set(c);
    yield buffer.subarray(0, c.length);
  }
  buffer.fill(0xaa);
}

async function inflate(chunks) {
  const parts = [];
  for await (const p of decompressFrame(chunks, { source: 't', maxBytes: 2 ** 40 })) parts.push(p.slice());
  return Buffer.concat(parts);
}

test('zstd: the same content whatever the chunk boundaries', async () => {
  const whole = await inflate(asAsync([CLEAN]));
  assert.ok(whole.length > CLEAN.length);
  for (let seed = 1; seed <= 30; seed++) {
    const max = [1, 3, 17, 512, 4096][seed % 5];
    assert.deepEqual(await inflate(asAsync(chunked(CLEAN, seed, max))), whole, `seed ${seed}`);
    assert.deepEqual(await inflate(reused(chunked(CLEAN, seed, max))), whole, `seed ${seed}, one buffer`);
  }
});

test('zstd: truncation, a bad checksum, trailing bytes and a second frame are refused', async () => {
  const cases = {
    'truncated zstd stream': CLEAN.subarray(0, CLEAN.length - 1),
    'checksum': Buffer.concat([CLEAN.subarray(0, CLEAN.length - 4), Buffer.alloc(4)]),
    'data after the zstd frame': Buffer.concat([CLEAN, Buffer.from([0])]),
    'data after the zstd frame ': Buffer.concat([CLEAN, CLEAN]),
    'skippable frame': Buffer.concat([Buffer.from([0x50, 0x2a, 0x4d, 0x18, 1, 0, 0, 0, 0]), CLEAN]),
    'gzip': Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0]),
  };
  for (const [rule, data] of Object.entries(cases)) {
    for (const seed of [1, 2]) {
      await assert.rejects(inflate(asAsync(chunked(data, seed, 700))), (e) => e.message.includes(rule.trim()), rule);
    }
  }
  await assert.rejects(inflate(asAsync([CLEAN])).then(() => decompressFrame(asAsync([CLEAN]), { source: 't', maxBytes: 1000 }).next()), /max_bytes/);
});

test('a bundle verifies the same whatever the chunk boundaries', async () => {
  const services = nodeServices();
  const first = await verifyBundle(asAsync([CLEAN]), { source: 'clean', ...services, now: () => 'T' });
  assert.equal(first.verdict, 'verified');
  assert.equal(first.counts.failed, 0);
  for (const seed of [3, 5, 7]) {
    const again = await verifyBundle(asAsync(chunked(CLEAN, seed, 999)), { source: 'clean', ...services, now: () => 'T' });
    assert.deepEqual(again, first);
    const reread = await verifyBundle(reused(chunked(CLEAN, seed, [5, 17, 4096][seed % 3])), { source: 'clean', ...services, now: () => 'T' });
    assert.deepEqual(reread, first);
  }
});

test('a single-byte change of the archive is refused or fails, unless the tar is unchanged', async () => {
  const services = nodeServices();
  const whole = await inflate(asAsync([CLEAN]));
  for (let i = 0; i < CLEAN.length; i += Math.max(1, Math.floor(CLEAN.length / 150))) {
    const data = new Uint8Array(CLEAN);
    data[i] ^= 0x20;
    const r = await verifyBundle(asAsync([data]), { source: `byte ${i}`, ...services });
    if (r.verdict === 'verified') {
      // zstd can carry bits that change no output (table descriptions): same tar, same bundle.
      assert.deepEqual(await inflate(asAsync([data])), whole, `byte ${i}`);
    }
  }
});

/**
 * The bag read from CLEAN with zstd pieces of at most `pieceBytes`, plain as JSON, and how
 * many members the at-once hash (`bytes`) hashed.
 */
async function readBag(pieceBytes, oneShot, bytes = false) {
  const { sha256 } = nodeServices();
  const reader = new ByteReader(decompressFrame(asAsync([CLEAN]), { source: 't', maxBytes: 2 ** 40, pieceBytes }));
  const sha256OneShot = oneShot ? async (data) => createHash('sha256').update(data).digest('hex') : undefined;
  let atOnce = 0;
  const sha256Bytes = bytes
    ? (data) => {
        atOnce++;
        return nodeServices().sha256Bytes(data);
      }
    : undefined;
  const collector = bagCollector('t', sha256, sha256OneShot, sha256Bytes);
  await readTar(reader, { source: 't', maxBytes: 2 ** 40 }, collector.visit);
  await collector.settle();
  const bag = collector.result();
  return {
    bag: {
      files: [...bag.files].map(([k, v]) => [k, v.sha256, v.size]),
      kept: [...bag.kept].map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
      directories: [...bag.directories],
    },
    atOnce,
  };
}

test('the bag is the same whatever the size of the pieces zstd reuses, hashed streaming, whole or at once', async () => {
  const { bag: reference } = await readBag(undefined, false);
  assert.ok(reference.kept.length > 5 && reference.files.length > reference.kept.length);
  for (const pieceBytes of [undefined, 1, 7, 511, 512, 1000, 4099]) {
    for (const [oneShot, bytes] of [[false, false], [true, false], [false, true], [true, true]]) {
      const { bag, atOnce } = await readBag(pieceBytes, oneShot, bytes);
      assert.deepEqual(bag, reference, `pieces of ${pieceBytes}, one-shot ${oneShot}, at once ${bytes}`);
      // Members in one chunk are hashed at once when that hash is given, the others streaming.
      if (bytes && pieceBytes === undefined) assert.ok(atOnce > reference.files.length / 2, `${atOnce} hashed at once`);
      if (!bytes) assert.equal(atOnce, 0);
    }
  }
});

test('the at-once hash is SHA-256', () => {
  const { sha256Bytes } = nodeServices();
  for (const n of [0, 1, 55, 56, 64, 2048, 100000]) {
    const data = new Uint8Array(n).map((_, i) => (i * 31 + n) & 255);
    assert.equal(sha256Bytes(data), createHash('sha256').update(data).digest('hex'));
  }
  assert.equal(sha256Bytes(new Uint8Array(0)), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});
