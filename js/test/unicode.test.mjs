import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { folded, nameProblem, utf8Length } from '../src/names.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VENV = `${ROOT}.venv/bin/python`;
const PYTHON = process.env.PYTHON ?? (existsSync(VENV) ? VENV : 'python3');

// Python's verdict on every code point as a one-character name, collapsed into runs of
// code points that fold to themselves with the same problem (its code point written
// "U+cp"); then probes of several code
// points that exercise what NFC does beyond one code point: canonical reordering (a mark
// followed by one mark of every combining class) and composition (each decomposable code
// point given decomposed).
const DUMP = String.raw`
import json, sys, unicodedata
from bundler.archive.names import first_unassigned, folded, name_problem
runs = []
for cp in range(0x110000):
    if 0xD800 <= cp < 0xE000:
        continue
    c = chr(cp)
    fold = folded(c)
    fold = None if fold == c else fold
    problem = name_problem(c)
    if problem is not None:
        problem = problem.replace(f"U+{cp:04X} ", "U+cp ")
    last = runs[-1] if runs else None
    if fold is None and last is not None and last[2] is None and last[3] == problem and last[1] == cp - 1:
        last[1] = cp
    else:
        runs.append([cp, cp, fold, problem])
assigned = [chr(cp) for cp in range(0x80, 0x110000)
            if not 0xD800 <= cp < 0xE000 and first_unassigned(chr(cp)) is None]
marks = [c for c in assigned if unicodedata.combining(c)]
classes = {}
for c in marks:
    classes.setdefault(unicodedata.combining(c), c)
probes = ["a" + m + r for m in marks for r in classes.values()]
probes += [unicodedata.normalize("NFD", c) for c in assigned if unicodedata.normalize("NFD", c) != c]
probes += ["e" + unicodedata.normalize("NFD", c) for c in assigned if unicodedata.normalize("NFD", c) != c]
json.dump({"runs": runs, "probes": [[p, name_problem(p), folded(p)] for p in probes]}, sys.stdout)
`;

test('names: the JavaScript verifier folds and refuses every code point and NFC probe exactly as the Python one', () => {
  const r = spawnSync(PYTHON, ['-c', DUMP], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  const { runs, probes } = JSON.parse(r.stdout);
  const wrong = [];
  let covered = 0;
  for (const [start, end, fold, problem] of runs) {
    for (let cp = start; cp <= end; cp++) {
      const c = String.fromCodePoint(cp);
      const hex = cp.toString(16).toUpperCase().padStart(4, '0');
      const mine = [folded(c) === c ? null : folded(c), nameProblem(c)?.replace(`U+${hex} `, 'U+cp ') ?? null];
      if (mine[0] !== fold || mine[1] !== problem) wrong.push([cp.toString(16), fold, problem, ...mine]);
      covered++;
    }
  }
  assert.equal(covered, 0x110000 - 0x800, 'every code point but the surrogates is compared');
  for (const [probe, problem, fold] of probes) {
    if (nameProblem(probe) !== problem || folded(probe) !== fold) {
      wrong.push([[...probe].map((c) => c.codePointAt(0)?.toString(16)).join(' '), fold, problem, folded(probe), nameProblem(probe)]);
    }
  }
  assert.ok(probes.length > 50000, `${probes.length} probes`);
  assert.deepEqual(wrong.slice(0, 20), []);
});

test('names: the case folding pairs an independent review found folding apart are one name in both verifiers', () => {
  for (const [a, b] of [['\u1e9e.json', 'ss.json'], ['\u00df', 'ss'], ['\u03c2', '\u03c3'], ['\u212a', 'k']]) {
    assert.equal(folded(a), folded(b), `${a} ${b}`);
  }
  // Full case folding keeps the dotless i apart from i (Python's casefold; no Turkic rule).
  assert.notEqual(folded('\u0131.json'), folded('i.json'));
  assert.match(String(nameProblem('\u{1e08f}')), /^U\+1E08F is not assigned in Unicode 14\.0\.0$/);
});

test('utf8Length counts what TextEncoder writes, for every length class and a lone surrogate', () => {
  const encoder = new TextEncoder();
  const pieces = ['a', '\u007f', '\u0080', '\u07ff', '\u0800', '\ufffd', '\uffff', '\u{10000}', '\u{10ffff}', '\ud800', '\udc00', '\u00e9', '\u6f22'];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  for (let k = 0; k < 20000; k++) {
    let text = '';
    for (let n = next() % 12; n > 0; n--) text += pieces[next() % pieces.length];
    assert.equal(utf8Length(text), encoder.encode(text).length, JSON.stringify(text));
  }
});

test('a console line shows at most 1000 characters of one text: its first and last 500, never half a pair', async () => {
  const { shownClipped, CONSOLE_CHARS } = await import('../src/textsafe.mjs');
  const cut = ' ... (cut: --json gives it whole) ... ';
  assert.equal(CONSOLE_CHARS, 1000);
  assert.equal(shownClipped('a'.repeat(1000)), 'a'.repeat(1000));
  assert.equal(shownClipped('n'.repeat(5000) + ': the rule'), 'n'.repeat(500) + cut + 'n'.repeat(490) + ': the rule');
  assert.equal(shownClipped('\u0001'.repeat(250)), '\\x01'.repeat(250));
  assert.equal(shownClipped('\u0001'.repeat(251)), '\\x01'.repeat(125) + cut + '\\x01'.repeat(125));
  assert.equal(shownClipped('a' + '\u{e0041}'.repeat(100)), 'a' + '\\U000e0041'.repeat(49) + cut + '\\U000e0041'.repeat(50));
  // Counted in code points: 500 emoji each side (1,000 UTF-16 units), no half pair.
  assert.equal(shownClipped('\u{1f600}'.repeat(1001)), '\u{1f600}'.repeat(500) + cut + '\u{1f600}'.repeat(500));
  assert.equal(shownClipped('a' + '\u{1f600}'.repeat(1001)), 'a' + '\u{1f600}'.repeat(499) + cut + '\u{1f600}'.repeat(500));
  assert.equal(shownClipped(null), 'null');
  // The page cuts the fields it lists the same way, at its own limit and marker.
  assert.equal(shownClipped('\u202e'.repeat(700), 4096, ' [cut] '), '\\u202e'.repeat(341) + ' [cut] ' + '\\u202e'.repeat(341));
  assert.equal(shownClipped('\u202e'.repeat(682), 4096, ' [cut] '), '\\u202e'.repeat(682));
  for (const ch of ['\\', '\u202e', '\u6f22', 'e\u0301', '\u{e0041}', '\x7f']) {
    const [head, tail] = shownClipped(ch.repeat(5000)).split(cut);
    assert.ok([...head].length <= 500 && [...tail].length <= 500, ch);
  }
});
