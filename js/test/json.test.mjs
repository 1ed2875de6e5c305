import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseJson } from '../src/json.mjs';
import { canonicalText } from '../src/jcs.mjs';

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
