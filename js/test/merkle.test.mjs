import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { TreeBuilder, rootFromPath } from '../src/merkle.mjs';
import { sha256, sha256Bytes } from '../src/node.mjs';

const unhex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const LEAVES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'];
const ROOTS = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

test('a tree hashing each leaf and node from one buffer gives the same roots and paths', () => {
  // Leaves of every size up to past the buffer the builder starts with (1 KiB), in
  // several orders of growth; every root and every path agree with the hasher's.
  const sizes = [0, 1, 31, 32, 33, 64, 1023, 1024, 1025, 3000, 5, 70000, 2];
  for (let n = 1; n <= sizes.length; n++) {
    const plain = new TreeBuilder(sha256);
    const once = new TreeBuilder(sha256, sha256Bytes);
    sizes.slice(0, n).forEach((size, i) => {
      const leaf = Uint8Array.from({ length: size }, (_, j) => (i * 131 + j * 7) & 0xff);
      plain.append(leaf);
      once.append(leaf);
    });
    assert.equal(once.root(), plain.root());
    for (let m = 0; m < n; m++) assert.deepEqual(once.path(m), plain.path(m));
  }
  const t = new TreeBuilder(sha256, sha256Bytes);
  for (let n = 1; n <= 8; n++) {
    t.append(unhex(LEAVES[n - 1]));
    assert.equal(t.root(), ROOTS[n - 1]);
  }
  assert.equal(new TreeBuilder(sha256, sha256Bytes).root(), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

test('the CT test vectors of SPEC 11.1', () => {
  for (let n = 1; n <= 8; n++) {
    const t = new TreeBuilder(sha256);
    for (const l of LEAVES.slice(0, n)) t.append(unhex(l));
    assert.equal(t.root(), ROOTS[n - 1]);
  }
  const t = new TreeBuilder(sha256);
  for (const l of LEAVES) t.append(unhex(l));
  assert.deepEqual(t.path(0), [
    '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
    '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
    '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
  ]);
  assert.equal(new TreeBuilder(sha256).root(), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

test('every inclusion path of trees up to 40 leaves verifies, and no other leaf or index does', () => {
  for (let n = 1; n <= 40; n++) {
    const t = new TreeBuilder(sha256);
    for (let i = 0; i < n; i++) t.append(new Uint8Array([i]));
    const root = t.root();
    for (let m = 0; m < n; m++) {
      const path = t.path(m);
      assert.equal(rootFromPath(sha256, m, n, t.leaves[m], path), root);
      if (n > 1) assert.notEqual(rootFromPath(sha256, (m + 1) % n, n, t.leaves[m], path), root);
      assert.equal(rootFromPath(sha256, n, n, t.leaves[m], path), null);
    }
  }
});

test('the RFC 6962 inclusion probes of tests/data/ct-inclusion', () => {
  const dir = new URL('../../tests/data/ct-inclusion/', import.meta.url);
  if (!existsSync(dir)) return;
  let checked = 0;
  const walk = (u) => {
    for (const e of readdirSync(u, { withFileTypes: true })) {
      const child = new URL(e.name + (e.isDirectory() ? '/' : ''), u);
      if (e.isDirectory()) walk(child);
      else if (e.name.endsWith('.json')) {
        const probe = JSON.parse(readFileSync(child, 'utf8'));
        if (!('leafIdx' in probe) || !('treeSize' in probe)) continue;
        const leaf = Buffer.from(probe.leafHash ?? '', 'base64').toString('hex');
        const path = (probe.proof ?? []).map((p) => Buffer.from(p, 'base64').toString('hex'));
        const root = Buffer.from(probe.root ?? '', 'base64').toString('hex');
        const okShape = path.every((p) => p.length === 64) && root.length === 64 && leaf.length === 64;
        const got = okShape && Number.isSafeInteger(probe.leafIdx) && Number.isSafeInteger(probe.treeSize) && probe.leafIdx >= 0
          ? rootFromPath(sha256, probe.leafIdx, probe.treeSize, leaf, path) === root : false;
        if (typeof probe.wantErr === 'boolean') {
          assert.equal(got, !probe.wantErr, child.pathname);
          checked++;
        }
      }
    }
  };
  walk(dir);
  assert.equal(checked, 98);
});
