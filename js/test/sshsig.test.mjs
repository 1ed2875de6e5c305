import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { verifyBundle } from '../src/verify.mjs';
import { checkProof } from '../src/proof.mjs';
import { nodeServices } from '../src/node.mjs';
import { parseAllowedSigners, parseSignature, matchPatternList, checkSignature, quoted } from '../src/sshsig.mjs';
import { anchorPath } from '../src/signatures.mjs';

const data = (n) => new Uint8Array(readFileSync(new URL(`./data/${n}`, import.meta.url)));
const ALLOWED = new TextDecoder().decode(data('allowed_signers'));
async function* once(b) {
  yield b;
}

test('a bundle signed by an allowed signer anchors the result; another identity fails', async () => {
  const s = nodeServices();
  const ok = await verifyBundle(once(data('signed.tar.zst')), { source: 's', ...s, allowedSigners: ALLOWED, identity: 'auditor@example.org' });
  assert.equal(ok.verdict, 'verified');
  assert.match(ok.anchor.signer, /^auditor@example\.org, key SHA256:/);
  const bad = await verifyBundle(once(data('signed.tar.zst')), { source: 's', ...s, allowedSigners: ALLOWED, identity: 'mallory' });
  assert.equal(bad.verdict, 'failed');
  assert.ok(bad.claims.some((c) => c.state === 'failed' && c.group === 2));
  const plain = await verifyBundle(once(data('rpt-clean.tar.zst')), { source: 'u', ...s, allowedSigners: ALLOWED });
  assert.equal(plain.verdict, 'failed');
});

test('check-proof: proven, unanchored, and not proven when a digest alone is the anchor', async () => {
  const s = nodeServices();
  const p = data('proof.json');
  assert.equal((await checkProof(p, { source: 'p', ...s })).exit_code, 0);
  assert.equal((await checkProof(p, { source: 'p', ...s, expectBundleDigest: 'sha256:' + '0'.repeat(64) })).exit_code, 1);
  assert.equal((await checkProof(p, { source: 'p', ...s, allowedSigners: ALLOWED, identity: 'auditor@example.org' })).exit_code, 0);
  const text = new TextDecoder().decode(p).replace('"leaf_index":', '"leaf_index":1,"leaf_index":');
  assert.equal((await checkProof(new TextEncoder().encode(text), { source: 'p', ...s })).exit_code, 3);
});

test('allowed_signers lines as ssh-keygen reads them', () => {
  const key = ALLOWED.trim().split(/\s+/).slice(1).join(' ');
  const lines = parseAllowedSigners(`# comment\n\na@x,c@x namespaces="evalbook-*",valid-after="20200101" ${key} note\n`, 'f');
  assert.equal(lines[0].principals, "a@x,c@x");
  assert.equal(lines[0].namespaces, 'evalbook-*');
  assert.throws(() => parseAllowedSigners(`x bogus="1" ${key}\n`, 'f'), /unknown option/);
  assert.throws(() => parseAllowedSigners('# nothing\n', 'f'), /no signers/);
  assert.equal(matchPatternList('alice@example.org', '*@example.org,!bob@*'), true);
  assert.equal(matchPatternList('bob@example.org', '*@example.org,!bob@*'), false);
});

test('armor line ends as ssh-keygen reads them: a CRLF header is refused, CR in the body is whitespace', () => {
  const proof = JSON.parse(new TextDecoder().decode(data('proof.json')));
  const sig = proof.head_signature;
  assert.equal(typeof sig, 'string');
  const [header, ...rest] = sig.split('\n');
  const good = parseSignature(sig, 's');
  for (const footer of ['\n', '\r\n', '']) {
    const body = rest.join('\n').replace(/\n+$/, '');
    assert.deepEqual(parseSignature(`${header}\n${body.replace(/\n/g, '\r\n')}${footer}`, 's').publicKeyBlob, good.publicKeyBlob);
    assert.throws(() => parseSignature(`${header}\r\n${body}${footer}`, 's'), /plain line feed, as ssh-keygen reads it/);
    assert.throws(() => parseSignature(`${header}\r\n${body.replace(/\n/g, '\r\n')}${footer}`, 's'), /plain line feed/);
  }
});

test('a namespace holding a backslash reads as the Python verifier reads it: one backslash, escaped once where shown', async () => {
  const s = nodeServices();
  const text = new TextDecoder().decode(data('namespace-backslash.sig'));
  const crypto = { sha256: s.sha256, sha512: s.sha512, verifyEd25519: s.verifyEd25519 };
  await assert.rejects(checkSignature(data('namespace-backslash.msg'), text, 'namespace-backslash.sig', crypto), (e) => {
    // The same line tests/test_sshsig.py expects of the Python verifier for these bytes.
    assert.equal(e.message, "namespace-backslash.sig: signature is for namespace 'evalbook\\bundle', not 'evalbook-bundle-head-v1'");
    return true;
  });
  assert.equal(quoted('a\\b'), "'a\\b'");
});

test('the anchor claim names the sidecar it rests on, never bundle-head.json.sig the bundle does not hold', async () => {
  const s = nodeServices();
  // The signed bundle's embedded signature, over the same head (a signature is outside
  // the bundle digest): a sidecar of the unsigned bundle that anchors it, or, for
  // another identity, that nothing anchors. Either way the claim names the sidecar.
  const text = data('other-head.sig');
  const sidecars = [{ name: 'elsewhere/side car.sig', text }];
  for (const [identity, verdict, state] of [['auditor@example.org', 'verified', 'proven'], ['mallory', 'failed', 'failed']]) {
    const r = await verifyBundle(once(data('rpt-clean.tar.zst')), { source: 'u', ...s, allowedSigners: ALLOWED, identity, sidecars });
    assert.equal(r.verdict, verdict);
    const anchor = r.claims.filter((c) => c.subject === 'signature');
    assert.equal(anchor.length, 1);
    assert.equal(anchor[0].state, state);
    assert.equal(anchor[0].path, 'elsewhere/side car.sig');
  }
  assert.equal(anchorPath([]), 'bundle-head.json.sig');
  const entry = (where, state) => ({ where, embedded: false, state, key: null, identity: null, reason: null });
  assert.equal(anchorPath([entry('a.sig', 'invalid'), entry('b.sig', 'verified')]), 'b.sig');
  assert.equal(anchorPath([entry('a.sig', 'invalid'), entry('b.sig', 'not_allowed')]), 'a.sig');
});
