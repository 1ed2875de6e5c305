import { test } from 'node:test';
import assert from 'node:assert/strict';

test('the shared UTF-8 decoder keeps a leading BOM and refuses invalid UTF-8', async () => {
  const { UTF8 } = await import('../src/util.mjs');
  assert.equal(UTF8.decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x61])), '\ufeffa');
  assert.throws(() => UTF8.decode(new Uint8Array([0xff])));
});

test('manifest lines: a BOM anywhere at the start is malformed, and the space set is the Python one plus U+FEFF', async () => {
  const { parseManifest } = await import('../src/bagit.mjs');
  const hex = 'a'.repeat(64);
  const enc = (/** @type {string} */ s) => new TextEncoder().encode(s);
  assert.throws(() => parseManifest(new Uint8Array([0xef, 0xbb, 0xbf, ...enc(`${hex}  data/x\n`)]), 'm'), /m:1: not/);
  const spaces = ['\t', '\v', '\f', '\r', '\x1c', '\x1d', '\x1e', '\x1f', ' ', '\x85', '\xa0', '\u1680', '\u2000', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff'];
  for (const sp of spaces) {
    for (const path of [`${sp}data/x`, `data/x${sp}`]) {
      assert.throws(() => parseManifest(enc(`${hex}  ${path}\n`), 'm'), /m:1: not/, JSON.stringify(path));
    }
    assert.equal(parseManifest(enc(`${hex}  data/a${sp}b\n`), 'm').get(`data/a${sp}b`), hex);
  }
  for (const ok of ['\u200b', '\u00ad', '\u180e']) {
    assert.equal(parseManifest(enc(`${hex}  ${ok}data/x\n`), 'm').size, 1, JSON.stringify(ok));
  }
});

test('every UTF-8 TextDecoder of the verifier keeps a BOM (none silently drops U+FEFF)', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const found = [];
  for (const dir of ['../src/', '../page/', '../']) {
    const url = new URL(dir, import.meta.url);
    for (const name of readdirSync(url).filter((n) => n.endsWith('.mjs'))) {
      const text = readFileSync(new URL(name, url), 'utf8');
      for (const m of text.matchAll(/new TextDecoder\(([^)]*)\)/g)) found.push([`${dir}${name}`, m[1]]);
    }
  }
  assert.ok(found.length >= 2, JSON.stringify(found));
  for (const [where, args] of found) {
    if (/^'latin1'$/.test(args.trim())) continue;
    assert.match(args, /ignoreBOM: true/, `${where}: new TextDecoder(${args}) drops a leading BOM`);
    assert.match(args, /fatal: true/, `${where}: new TextDecoder(${args}) replaces invalid UTF-8`);
  }
});
