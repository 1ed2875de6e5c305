import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseJson, valueBound } from '../src/json.mjs';
import { canonicalText, string } from '../src/jcs.mjs';
import { loadJson } from '../src/util.mjs';

const enc = new TextEncoder();
const parse = (s) => parseJson(typeof s === 'string' ? enc.encode(s) : s, 't');

test('JCS numbers and key order as RFC 8785 gives them', () => {
  const cases = [
    ['1.0', '1'], ['1e21', '1e+21'], ['1e20', '100000000000000000000'], ['-0', '0'], ['0.1', '0.1'],
    ['1e-7', '1e-7'], ['123456789012345.6', '123456789012345.6'], ['5e-324', '5e-324'],
    ['{"b":1,"a":2,"\\u00e9":3,"\\ud83d\\ude00":4,"\\uffff":5}', '{"a":2,"b":1,"é":3,"😀":4,"\uffff":5}'],
    ['"\\u0007\\/\\"\\\\\\n"', '"\\u0007/\\"\\\\\\n"'],
  ];
  for (const [input, want] of cases) assert.equal(canonicalText(parse(input)), want, input);
});

test('SPEC 2 rejections, each by its rule', () => {
  const bad = {
    'duplicate key': '{"a":1,"a":1}',
    'outside -(2^53-1)': '9007199254740992',
    'not finite': '1e400',
    'lone surrogate': '"\\ud800"',
    'lone surrogate ': '"\\udc00x"',
    'byte order mark': '\ufeff{}',
    'nesting deeper': '['.repeat(65) + ']'.repeat(65),
    'data after': '{} {}',
    'control character': '"a\u0001"',
    'invalid number': '01',
    'invalid number ': '1.',
    'unexpected character': 'NaN',
  };
  for (const [rule, text] of Object.entries(bad)) {
    assert.throws(() => parse(text), (e) => e.message.includes(rule.trim()), rule);
  }
  assert.throws(() => parse(new Uint8Array([0x22, 0xff, 0x22])), /UTF-8/);
  assert.equal(canonicalText(parse('['.repeat(64) + ']'.repeat(64))).length, 128);
  assert.equal(parse('-9007199254740991'), -9007199254740991);
});

test('a key named __proto__ is data, never the prototype', () => {
  const v = parse('{"__proto__":{"x":1}}');
  assert.equal(Object.getPrototypeOf(v), Object.prototype);
  assert.equal(canonicalText(v), '{"__proto__":{"x":1}}');
});

/** RFC 8785's string escaping written out by hand, the reference for string(). @param {string} s */
function escapedByHand(s) {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) {
      out += s[i] + s[i + 1];
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) throw new Error('lone surrogate');
    else if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0c) out += '\\f';
    else if (c === 0x0d) out += '\\r';
    else if (c < 0x20) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += s[i];
  }
  return out + '"';
}

test('JCS strings: every UTF-16 code unit alone and in context, pairs, lone surrogates refused', () => {
  const samples = [];
  for (let c = 0; c < 0x10000; c++) samples.push(String.fromCharCode(c), `a${String.fromCharCode(c)}b`);
  samples.push('\ud83d\ude00', 'x\ud83d\ude00\ud83d\ude00y', '\ude00\ud83d', '\ud83d', 'a\ud83db', '\u2028\u2029\x7f', '');
  for (const s of samples) {
    let want;
    try {
      want = escapedByHand(s);
    } catch {
      assert.throws(() => string(s), /lone surrogate/, JSON.stringify(s));
      continue;
    }
    assert.equal(string(s), want, JSON.stringify(s));
  }
});

test('canonical text read natively gives what the strict reader gives, and everything it refuses is still refused', () => {
  const good = ['{"a":1,"b":[true,false,null],"c":"\\u0007\\"x"}', '[9007199254740991,-9007199254740991,1e+21,0.5]', '{"__proto__":{"x":1}}', '"\ud83d\ude00"', '{}',
    // Sixteen digits in a row inside strings (a hex digest often has them) beside numbers at the bounds.
    '{"d":"sha256:1234567890123456789abcdef","n":[9007199254740991,-9007199254740991,1e+21,-1.5e+300]}', '["0000000000000000",{"x":[[-9007199254740991]]}]'];
  for (const text of good) assert.deepEqual(loadJson(enc.encode(text), 't', true), parse(text), text);
  const proto = loadJson(enc.encode('{"__proto__":{"x":1}}'), 't', true);
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  assert.deepEqual(Object.keys(proto), ['__proto__']);
  const bad = {
    '{"a":1,"a":1}': /duplicate key/,
    '{"a":1,"a":2}': /duplicate key/,
    '"\\ud800"': /lone surrogate/,
    '9007199254740992': /outside/,
    '18014398509481984': /outside/,
    '[18014398509481984]': /outside/,
    '{"d":"sha256:1234567890123456","n":9007199254740992}': /outside/,
    '["0000000000000000",{"x":[[-9007199254740992]]}]': /outside/,
    '{"__proto__":{"b":18014398509481984},"s":"x1234567890123456"}': /outside/,
    '1e400': /not finite/,
    '[-1e400]': /not finite/,
    ['['.repeat(65) + ']'.repeat(65)]: /nesting deeper/,
    '{"b":1,"a":2}': /not stored canonical/,
    '1.0': /not stored canonical/,
  };
  for (const [text, rule] of Object.entries(bad)) {
    assert.throws(() => loadJson(enc.encode(text), 't', true), rule, text);
    if (rule.source !== 'not stored canonical') assert.throws(() => parse(text), rule, text);
  }
});

test('canonical texts with long digit runs: the native read and the strict reader agree on value or refusal', () => {
  let seed = 7;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
  const numbers = [0, 1, -1, 9007199254740991, -9007199254740991, 9007199254740992, -9007199254740992, 2 ** 60, 1e20, 1e21, 0.5, 1234567890123456];
  const leaf = () => (rand(2) ? numbers[rand(numbers.length)] : 'x' + '0123456789abcdef'.repeat(2).slice(rand(16), 16 + rand(16)) + '9'.repeat(rand(20)));
  const gen = (d) => {
    if (d > 3 || rand(3) === 0) return leaf();
    if (rand(2)) return Array.from({ length: rand(4) }, () => gen(d + 1));
    const o = {};
    for (let i = rand(4); i > 0; i--) o[`k${rand(10)}`] = gen(d + 1);
    return o;
  };
  for (let i = 0; i < 3000; i++) {
    const text = canonicalText(gen(0));
    let strict;
    try {
      strict = { value: parse(text) };
    } catch (e) {
      strict = { error: e.message };
    }
    let fast;
    try {
      fast = { value: loadJson(enc.encode(text), 't', true) };
    } catch (e) {
      fast = { error: e.message };
    }
    assert.deepEqual(fast, strict, text);
  }
});

test('canonicalText through the native writer is the JCS form written by hand, and refuses the same', async () => {
  const { canonicalTextByHand } = await import('../src/jcs.mjs');
  const values = [
    { b: 1, a: 2 }, { 1: 'x', 10: 'y', 9: 'z', a: [1, { d: null, c: true }] }, { '\ud83d\ude00': 1, '\uffff': 2, 'é': 3 },
    [1e21, 1e-7, -0, 0.1, 5e-324, 123456789012345.6], '\u0007/"\\\n\u2028', { '\ud800': 1 }, ['\udc00'],
    [NaN], [Infinity], [undefined], { a: undefined }, [() => 1], { toJSON: 1 }, new Date(0), new Map(), Object.create(null),
    Object.assign(Object.create(null), { b: 1, a: 2 }), JSON.parse('{"__proto__":{"x":1},"a":1}'), [, 1],
    JSON.parse('['.repeat(64) + ']'.repeat(64)), JSON.parse('['.repeat(65) + ']'.repeat(65)),
    JSON.parse('{"a":'.repeat(64) + '1' + '}'.repeat(64)), JSON.parse('{"a":'.repeat(65) + '1' + '}'.repeat(65)),
  ];
  for (const v of values) {
    let want;
    try {
      want = canonicalTextByHand(v);
    } catch (e) {
      assert.throws(() => canonicalText(v), { message: e.message });
      continue;
    }
    assert.equal(canonicalText(v), want);
  }
});

test('valueBound counts one more than the commas, colons and opening brackets, and nothing else', () => {
  const reference = (/** @type {Uint8Array} */ b) => 1 + [...b].filter((x) => x === 0x2c || x === 0x3a || x === 0x5b || x === 0x7b).length;
  const every = Uint8Array.from({ length: 256 }, (_, i) => i);
  assert.equal(valueBound(every), 5);
  assert.equal(valueBound(new Uint8Array(0)), 1);
  assert.equal(valueBound(new TextEncoder().encode('{"a":[1,{"b":2}],"c":"x,y:[{"}')), 13);
  let seed = 7;
  for (let n = 0; n < 200; n++) {
    const b = Uint8Array.from({ length: n * 13 }, () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff);
    assert.equal(valueBound(b), reference(b));
  }
});

test('sortedBy orders by code point whether or not the native sort can decide (randomised)', async () => {
  const { sortedBy, byteOrder } = await import('../src/util.mjs');
  let seed = 99;
  const rnd = (/** @type {number} */ n) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
  // Units from plain ASCII, from just under U+D800, the surrogates (paired and lone) and
  // U+E000..U+FFFF: the range where UTF-16 order and code point order part.
  const UNITS = ['a', 'B', '/', '0', '\u00e9', '\ud7ff', '\ue000', '\uffff', '\ud83d\ude00', '\ud800', '\udfff', '\uff21'];
  for (let round = 0; round < 500; round++) {
    const plain = round % 2 === 0;
    const xs = Array.from({ length: rnd(30) }, () => Array.from({ length: rnd(5) }, () => UNITS[rnd(plain ? 5 : UNITS.length)]).join(''));
    const expected = [...xs].sort(byteOrder);
    assert.deepEqual(sortedBy(xs), expected, JSON.stringify(xs));
    assert.deepEqual(sortedBy(new Set(xs)), [...new Set(expected)]);
    assert.deepEqual(sortedBy(xs, (x) => x), expected);
  }
  // The one case the two orders differ on, both ways round.
  assert.deepEqual(sortedBy(['\uffff', '\ud83d\ude00']), ['\uffff', '\ud83d\ude00']);
  assert.deepEqual(sortedBy(['\ud83d\ude00', '\uffff']), ['\uffff', '\ud83d\ude00']);
  assert.deepEqual(sortedBy([3, 10, 2]), [10, 2, 3]);
});

test('a value is compared with a text and hashed piece by piece as its canonical text built whole would be', async () => {
  const { createHash } = await import('node:crypto');
  const { isCanonicalText, canonicalSha256, canonicalBytes } = await import('../src/jcs.mjs');
  let seed = 11;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
  const chars = ['a', '"', '\\', '\u0001', '\u00e9', '\u0100', '\u6f22', '\ud83d\ude00', '\u2028', '/', ' ', ':', ','];
  const str = () => Array.from({ length: rand(6) }, () => chars[rand(chars.length)]).join('');
  const leaf = () => [null, true, false, rand(1000) - 500, 0.5, 1e21, 1e-7, str()][rand(8)];
  const gen = (d) => {
    if (d > 3 || rand(3) === 0) return leaf();
    if (rand(2)) return Array.from({ length: rand(4) }, () => gen(d + 1));
    const o = {};
    for (let i = rand(4); i > 0; i--) o[str()] = gen(d + 1);
    return o;
  };
  const hasher = () => {
    const h = createHash('sha256');
    return { update: (b) => h.update(b), hex: () => h.digest('hex') };
  };
  for (let i = 0; i < 3000; i++) {
    const v = gen(0);
    const text = canonicalText(v);
    assert.equal(isCanonicalText(v, text), true, text);
    assert.equal(canonicalSha256(v, hasher()), createHash('sha256').update(canonicalBytes(v)).digest('hex'), text);
    // Any other text is not the value's canonical text: one more character, one less, a space.
    assert.equal(isCanonicalText(v, text + ' '), false, text);
    assert.equal(isCanonicalText(v, text.slice(0, -1)), false, text);
    const at = rand(text.length + 1);
    assert.equal(isCanonicalText(v, text.slice(0, at) + ' ' + text.slice(at)), false, text);
  }
  // Not JSON: not canonical, whatever the text; hashing it refuses.
  for (const v of [[NaN], ['\ud800'], { '\udc00': 1 }, [undefined]]) {
    assert.equal(isCanonicalText(v, 'x'), false);
    assert.throws(() => canonicalSha256(v, hasher()));
  }
  // A value whose canonical text is longer than one piece of the hash (64 K characters).
  const big = { a: 'x'.repeat(200000), b: Array.from({ length: 5000 }, (_, i) => ({ ['k' + i]: '\u6f22'.repeat(i % 7) })) };
  assert.equal(canonicalSha256(big, hasher()), createHash('sha256').update(canonicalBytes(big)).digest('hex'));
  assert.equal(isCanonicalText(big, canonicalText(big)), true);
});

test('strings with escapes read as JSON.parse reads them once every rule is checked', () => {
  let seed = 5;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
  const pieces = ['a', '\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t', '\\u0041', '\\u00e9', '\\u6F22', '\\ud83d\\ude00', '\\uD83D\\uDE00', '\u0100', '\ud83d\ude00', '\u2028', '\u007f'];
  for (let i = 0; i < 5000; i++) {
    const body = Array.from({ length: rand(12) }, () => pieces[rand(pieces.length)]).join('');
    const text = `{"k${body}":"${body}","n":["${body}"]}`;
    assert.deepEqual(parse(text), JSON.parse(text), text);
  }
  // A long string of escapes, read whole.
  const long = '"' + '\\"'.repeat(100000) + '\\u0100"';
  assert.equal(parse(long), '"'.repeat(100000) + '\u0100');
  const bad = {
    '"\\x"': /at character 2: invalid escape/,
    '"a\\': /invalid escape/,
    '"\\u12"': /invalid \\u escape/,
    '"\\u12g4"': /at character 3: invalid \\u escape/,
    '"\\ud800"': /at character 7: lone surrogate escape/,
    '"\\ud800\\u0041"': /lone surrogate escape/,
    '"\\ude00\\ud83d"': /at character 7: lone surrogate escape/,
    '"\\ud83d\\"': /lone surrogate escape/,
    '"a\tb"': /at character 2: control character in string/,
    '"abc': /unterminated string/,
    '{"a":1,"\\u0061":2}': /duplicate key "a"/,
  };
  for (const [text, rule] of Object.entries(bad)) assert.throws(() => parse(text), rule, text);
});
