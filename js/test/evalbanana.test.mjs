import { test } from 'node:test';
import assert from 'node:assert/strict';
import { boundedTailOf, sameJson } from '../src/evalbanana.mjs';
import { parseJson } from '../src/json.mjs';
import { canonicalText } from '../src/jcs.mjs';

const ENC = new TextEncoder();
const STEM = 'check-0123';
const BANNER = `[eval-banana: stdout truncated to the last 2000 characters; full output at checks/${STEM}.stdout.txt]\n`;

/** The rule as SPEC 10 states it, over the whole text: the reference. @param {string} text */
function reference(text) {
  const chars = [...text];
  return chars.length <= 2000 ? text : BANNER + chars.slice(-2000).join('');
}

/** @param {...number[]} parts */
function bytes(...parts) {
  return new Uint8Array(parts.flat());
}

test('the bounded tail from bytes is the rule over the whole text, at every length around the cut', () => {
  const points = ['a', '\u00e9', '\u20ac', '\u{1f600}', '\ufeff', '\u0000'];
  for (const n of [0, 1, 1999, 2000, 2001, 2002, 4001, 6000]) {
    for (const [k, p] of points.entries()) {
      // Mixed widths, so the cut falls on every kind of lead byte.
      let text = '';
      for (let i = 0; i < n; i++) text += i % 3 === 0 ? p : points[(k + i) % points.length];
      assert.equal(boundedTailOf(ENC.encode(text), STEM), reference(text), `${n} code points, ${JSON.stringify(p)}`);
    }
  }
});

test('a leading BOM counts as a code point and is kept, as the Python reader keeps it', () => {
  const text = '\ufeff' + 'x'.repeat(1999);
  assert.equal(boundedTailOf(ENC.encode(text), STEM), text);
  assert.equal(boundedTailOf(ENC.encode(text + 'y'), STEM), BANNER + 'x'.repeat(1999) + 'y');
});

test('bytes that are not UTF-8 have no tail, wherever the bad byte sits (chunk edges included)', () => {
  const chunk = 1024 * 1024;
  const bad = [[0x80], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xff], [0xe2, 0x82]];
  for (const seq of bad) {
    for (const at of [0, 5, chunk - 1, chunk, chunk + 1]) {
      const data = new Uint8Array(chunk + 8).fill(0x61);
      data.set(seq, at);
      // A truncated sequence is followed by 'a', which cannot continue it.
      assert.equal(boundedTailOf(data, STEM), null, `${seq} at ${at}`);
    }
  }
  assert.equal(boundedTailOf(bytes([0x61, 0xe2, 0x82]), STEM), null, 'ends inside a code point');
});

test('a code point across the validation chunk boundary is valid', () => {
  const chunk = 1024 * 1024;
  for (const shift of [1, 2, 3]) {
    const data = new Uint8Array(chunk + 4).fill(0x61);
    data.set([0xf0, 0x9f, 0x98, 0x80], chunk - shift);
    const text = new TextDecoder('utf-8', { fatal: true }).decode(data);
    assert.equal(boundedTailOf(data, STEM), reference(text), `shift ${shift}`);
  }
});

test('values compare as their canonical forms do, without writing them', () => {
  const pairs = [
    ['1', '1.0'], ['1', '1e0'], ['0', '-0'], ['true', '1'], ['false', '0'], ['null', '{}'], ['[]', '{}'],
    ['"1"', '1'], ['{"a":1,"b":[1,2]}', '{"b":[1,2],"a":1}'], ['{"a":1}', '{"a":1,"b":2}'],
    ['{"a":1,"b":2}', '{"a":1,"c":2}'], ['[1,2]', '[2,1]'], ['[[[]]]', '[[[]]]'], ['[[[]]]', '[[{}]]'],
    ['{"a":null}', '{}'], ['{"a":null}', '{"b":null}'], ['"\\u00e9"', '"\u00e9"'], ['0.1', '0.10000000000000001'],
    ['1e400', '1'], ['[1,[2,[3]]]', '[1,[2,[3]]]'], ['{"k":[{"x":true}]}', '{"k":[{"x":1}]}'],
  ];
  for (const [a, b] of pairs) {
    let va;
    let vb;
    try {
      va = parseJson(ENC.encode(a), 'a');
      vb = parseJson(ENC.encode(b), 'b');
    } catch {
      continue; // refused by the strict reader: never compared
    }
    assert.equal(sameJson(va, vb), canonicalText(va) === canonicalText(vb), `${a} vs ${b}`);
    assert.equal(sameJson(vb, va), canonicalText(va) === canonicalText(vb), `${b} vs ${a}`);
  }
  const many = Array.from({ length: 1_000_000 }, () => '');
  assert.equal(sameJson({ tags: many }, { tags: [...many] }), true);
  assert.equal(sameJson({ tags: many }, { tags: [...many.slice(1), 'x'] }), false);
});
