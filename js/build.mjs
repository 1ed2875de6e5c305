// Builds dist/verify-bundle.html (the package's bundler/report/templates/verify-bundle.html links to it): page/main.mjs and the core bundled by esbuild into
// one IIFE (the same script, started from a blob: URL, is the verifying worker; the archive hasher's worker, page/hash-worker.mjs, and the members' hasher,
// page/member-worker.mjs, each inlined as source text for a blob: URL; the zstd WebAssembly module inlined as base64 in src/zstd-wasm.mjs, the
// contract's schemas inlined as JSON), placed in page/template.html under a
// Content-Security-Policy that admits exactly that script by its SHA-256. The same
// sources give the same bytes (test/page-build.test.mjs holds the committed file to it).
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));

const COMMON = {
  bundle: true,
  format: /** @type {const} */ ('iife'),
  platform: /** @type {const} */ ('browser'),
  target: ['chrome110', 'firefox115', 'safari16'],
  minify: true,
  legalComments: /** @type {const} */ ('none'),
  write: false,
  charset: /** @type {const} */ ('utf8'),
  logLevel: /** @type {const} */ ('silent'),
};

export async function buildPage() {
  // The archive hasher's worker, as source text the page starts from a blob: URL.
  const worker = await build({ ...COMMON, entryPoints: [here('./page/hash-worker.mjs')] });
  // The members' hasher, likewise.
  const members = await build({ ...COMMON, entryPoints: [here('./page/member-worker.mjs')] });
  const result = await build({
    ...COMMON,
    define: {
      __HASH_WORKER_SOURCE__: JSON.stringify(worker.outputFiles[0].text),
      __MEMBER_WORKER_SOURCE__: JSON.stringify(members.outputFiles[0].text),
    },
    entryPoints: [here('./page/main.mjs')],
  });
  // Never close the script element early, whatever a string holds.
  const script = result.outputFiles[0].text.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--').trimEnd();
  const hash = "sha256-" + createHash('sha256').update(script, 'utf8').digest('base64');
  const template = readFileSync(here('./page/template.html'), 'utf8');
  return template.replace('@@SCRIPT_HASH@@', hash).replace('@@SCRIPT@@', () => script);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const html = await buildPage();
  mkdirSync(here('./dist/'), { recursive: true });
  writeFileSync(here('./dist/verify-bundle.html'), html);
  process.stdout.write(`js/dist/verify-bundle.html: ${html.length} bytes\n`);
}
