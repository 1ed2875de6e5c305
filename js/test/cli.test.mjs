import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../verify-bundle.mjs', import.meta.url));
const PUB = readFileSync(new URL('../../conformance/keys/conformance.key.pub', import.meta.url), 'utf8').split(' ').slice(0, 2).join(' ');
const DIR = mkdtempSync(join(tmpdir(), 'verify-cli-'));
const BUNDLE = join(DIR, 'absent.tar.zst'); // options are checked before any bundle is read

/** @param {string} name @param {string|Uint8Array} data */
function file(name, data) {
  const p = join(DIR, name);
  writeFileSync(p, data);
  return p;
}

function run(/** @type {string[]} */ args) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

mkdirSync(join(DIR, 'a-directory'));
const GOOD = `alice@example.org ${PUB}\n`;
const SIGNERS = {
  missing: [join(DIR, 'nonexistent'), 'not found'],
  directory: [join(DIR, 'a-directory'), 'is a directory'],
  empty: [file('empty', ''), 'lists no signers'],
  'comments only': [file('comments', '# nobody\n\n'), 'lists no signers'],
  'unknown option': [file('unknown-option', `alice@example.org unknownopt ${PUB}\n`), 'unknown option'],
  'bad line first': [file('bad-first', `alice@example.org ssh-ed25519 !!!\n${GOOD}`), ':1:'],
  'no key': [file('no-key', 'alice@example.org\n'), ':1:'],
  'not UTF-8': [file('latin1', Buffer.concat([Buffer.from('caf'), Buffer.from([0xe9]), Buffer.from(`@example.org ${PUB}\n`)])), 'not UTF-8'],
};

// An option file that cannot be read or parsed is an input error (SPEC 8: exit 3), for
// verify and check-proof alike, with and without --json.
for (const command of [[], ['verify'], ['check-proof']]) {
  for (const [kind, [path, words]] of Object.entries(SIGNERS)) {
    for (const json of [false, true]) {
      test(`${command[0] ?? '(default)'} --allowed-signers ${kind}${json ? ' --json' : ''}: exit 3, one line`, () => {
        const r = run([...command, BUNDLE, '--allowed-signers', path, ...(json ? ['--json'] : [])]);
        assert.equal(r.code, 3, r.stderr);
        assertOneLineError(r, json, 3, words);
      });
    }
  }
}

/** @param {{stdout: string, stderr: string}} r @param {boolean} json @param {number} code @param {string} words */
function assertOneLineError(r, json, code, words) {
  const lines = r.stderr.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /^error: /);
  assert.ok(lines[0].includes(words), `${lines[0]} should say ${words}`);
  if (json) {
    const out = r.stdout.split('\n').filter(Boolean);
    assert.equal(out.length, 1, r.stdout);
    const o = JSON.parse(out[0]);
    assert.deepEqual(Object.keys(o).sort(), ['command', 'error', 'exit_code', 'input', 'schema']);
    assert.equal(o.schema, 'evalbook.error.v1');
    assert.equal(o.exit_code, code);
    assert.ok(o.error.includes(words));
  } else {
    assert.equal(r.stdout, '');
  }
}

// A badly written option is a usage error (exit 2): one line, never the usage block.
const USAGE_CASES = [
  [['--bogus'], 'no such option'],
  [['--json=1'], 'takes no value'],
  [['--expect-bundle-digest', 'sha256:XYZ'], 'not a digest'],
  [['--expect-bundle-digest', `SHA256:${'a'.repeat(64)}`], 'not a digest'],
  [['--expect-report-digest', `sha256:${'A'.repeat(64)}`], 'not a digest'],
  [['--identity', 'alice@example.org'], 'need --allowed-signers'],
  [['--signature', join(DIR, 'empty')], 'need --allowed-signers'],
  [['--max-bytes', '0'], '--max-bytes'],
  [['--max-bytes', '000'], '--max-bytes'],
  [['--max-bytes', '-5'], '--max-bytes'],
  [['--max-bytes', '+5'], '--max-bytes'],
  [['--max-bytes', '1_000'], '--max-bytes'],
  [['--max-bytes', ' 7'], '--max-bytes'],
  [['--max-bytes', '1e9'], '--max-bytes'],
  [['--max-bytes', '\u0661\u0662'], '--max-bytes'],
  [['--max-bytes'], 'requires an argument'],
  [['--strict', '--strict', '--identity', 'x', '--identity', 'y'], 'given twice'],
];
for (const [args, words] of USAGE_CASES) {
  for (const json of [false, true]) {
    test(`usage error ${JSON.stringify(args)}${json ? ' --json' : ''}: exit 2, one line`, () => {
      const r = run([BUNDLE, ...(json ? ['--json'] : []), ...args]);
      assert.equal(r.code, 2, r.stderr);
      assertOneLineError(r, json, 2, words);
    });
  }
}

test('--max-bytes of any length in ASCII digits is accepted, as the Python verifier accepts it', () => {
  const r = run([BUNDLE, '--max-bytes', '99999999999999999999999', '--json']);
  // The option is fine; the absent bundle is what fails (exit 3, a verification record).
  assert.equal(r.code, 3, r.stderr);
  assert.equal(JSON.parse(r.stdout.split('\n')[0]).schema, 'evalbook.verification.v1');
});

test('every value option given twice is a usage error (exit 2), in every spelling; flags twice are accepted', () => {
  const proof = file('proof-absent.json', '{}');
  const VALUES = {
    verify: [BUNDLE, ['--expect-bundle-digest', '--expect-report-digest', '--allowed-signers', '--identity', '--signature', '--max-bytes']],
    'check-proof': [proof, ['--allowed-signers', '--identity', '--expect-bundle-digest']],
  };
  for (const [command, [target, options]] of Object.entries(VALUES)) {
    const head = command === 'verify' ? [target] : [command, target];
    for (const option of /** @type {string[]} */ (options)) {
      for (const twice of [[option, 'a', option, 'b'], [`${option}=a`, option, 'b'], [option, 'a', `${option}=b`]]) {
        const r = run([...head, ...twice]);
        assert.equal(r.code, 2, `${command} ${twice.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, new RegExp(`option ${option} given twice`));
      }
    }
    for (const flags of [['-q', '-q'], ['--quiet', '-q'], ['--json', '--json']]) {
      const r = run([...head, ...flags]);
      assert.notEqual(r.code, 2, `${command} ${flags.join(' ')}: ${r.stderr}`);
    }
  }
});
