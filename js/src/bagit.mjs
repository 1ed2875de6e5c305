// @ts-check
/**
 * The bag-level claims every bundle kind shares (SPEC 5, groups 1 and 2): bundle.json
 * stored canonical and its digest, the bundle head, bagit.txt, both manifests, the
 * tag files at the bag root and nothing else outside data/, Payload-Oxum, bag-info.txt
 * exactly as bundle.json determines it, the top directory.
 */
import { InputError } from './errors.mjs';
import { canonicalBytes, canonicalSha256, bytesEqual } from './jcs.mjs';
import { ENC, UTF8, sortedBy } from './util.mjs';

export const BAGIT_TXT = 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n';
export const MANIFEST = 'manifest-sha256.txt';
export const TAG_MANIFEST = 'tagmanifest-sha256.txt';
export const BAG_INFO = 'bag-info.txt';
export const BAGIT = 'bagit.txt';
export const HEAD_FILE = 'bundle-head.json';
export const HEAD_SIG_FILE = 'bundle-head.json.sig';
export const TAG_FILES = new Set([BAGIT, BAG_INFO, MANIFEST, TAG_MANIFEST, HEAD_FILE, HEAD_SIG_FILE]);

/** @param {Uint8Array} data @param {string} source */
function text(data, source) {
  try {
    return UTF8.decode(data);
  } catch {
    throw new InputError(`${source}: not UTF-8`);
  }
}

/**
 * A manifest path neither starts nor ends with a space character. The set is written out,
 * not taken from \s (JavaScript's and Python's differ: U+FEFF against U+001C-U+001F and
 * U+0085), so both verifiers read every line alike (bundler/archive/bag.py).
 */
const SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
const MANIFEST_LINE = new RegExp(`^([0-9a-f]{64}) {2}([^${SPACE}](?:[^]*[^${SPACE}])?)$`, 'u');

/**
 * path -> hex of a manifest; throws InputError (the claim fails) when malformed.
 * @param {Uint8Array} data @param {string} source
 */
export function parseManifest(data, source) {
  const t = text(data, source);
  if (t && !t.endsWith('\n')) throw new InputError(`${source}: last line is not LF-terminated`);
  /** @type {Map<string, string>} */
  const entries = new Map();
  const lines = t.split('\n').slice(0, -1);
  lines.forEach((line, i) => {
    const m = MANIFEST_LINE.exec(line);
    if (!m) throw new InputError(`${source}:${i + 1}: not '<64 lowercase hex>  <path>'`);
    if (entries.has(m[2])) throw new InputError(`${source}:${i + 1}: ${m[2]} listed twice`);
    entries.set(m[2], m[1]);
  });
  return entries;
}

/** @param {Uint8Array} data @param {string} source */
export function parseBagInfo(data, source) {
  const t = text(data, source);
  /** @type {Map<string, string>} */
  const fields = new Map();
  const lines = t.split(/\r\n|\n|\r/);
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  lines.forEach((line, i) => {
    const m = /^([A-Za-z0-9][A-Za-z0-9-]*): (.*)$/su.exec(line);
    if (!m) throw new InputError(`${source}:${i + 1}: not 'Label: value'`);
    if (fields.has(m[1])) throw new InputError(`${source}:${i + 1}: ${m[1]} given twice`);
    fields.set(m[1], m[2]);
  });
  return fields;
}

/**
 * The bundle head of SPEC 11.2, derived from bundle.json alone.
 * @param {any} bundle @param {string} bundleDigest
 */
export function bundleHead(bundle, bundleDigest) {
  const report = bundle.report !== undefined ? bundle.report : bundle.run;
  return {
    schema: 'evalbook.bundle_head.v1',
    bundle_digest: bundleDigest,
    report_id: report.report_id !== undefined ? report.report_id : report.run_id,
    report_digest: report.digest,
    exported_at: bundle.exported_at,
    cases_tree: bundle.cases_tree,
  };
}

/**
 * bag-info.txt as bundle.json determines it.
 * @param {any} bundle @param {string} digest @param {number|bigint} payloadBytes @param {number|bigint} fileCount
 */
export function bagInfoBytes(bundle, digest, payloadBytes, fileCount) {
  const head = bundleHead(bundle, digest);
  const fields = [
    ['Bag-Software-Agent', `${bundle.exporter.tool} ${bundle.exporter.version}`],
    ['Bagging-Date', bundle.exported_at.slice(0, 10)],
    ['Bundle-Digest', digest],
    ['Bundle-Schema', bundle.schema],
    ['External-Identifier', String(head.report_id)],
    ['Payload-Oxum', `${payloadBytes}.${fileCount}`],
    ['Report-Digest', head.report_digest],
  ];
  return ENC.encode(fields.map(([k, v]) => `${k}: ${v}\n`).join(''));
}

/**
 * Groups 2 and 1 (bundle.json, the head, BagIt, the top directory). Returns the bundle digest.
 * @param {import('./verifyctx.mjs').Ctx} ctx
 * @param {string} expectedTop
 */
export function checkBagFrame(ctx, expectedTop) {
  const digest = checkBundleDocument(ctx);
  checkBagit(ctx, digest);
  ctx.claims.compare(1, 'top directory names the report or run', expectedTop, ctx.bag.top, {
    detail: 'top directory does not match the bundle\'s id',
  });
  return digest;
}

/** @param {import('./verifyctx.mjs').Ctx} ctx */
function checkBundleDocument(ctx) {
  const { bag, claims, bundle, options } = ctx;
  // The bundle digest is the SHA-256 of bundle.json's JCS bytes: the file's own digest
  // when it is stored canonical, else hashed as it is written (never built whole: a
  // bundle.json may be 32 MiB).
  const digest = ctx.bundleCanonical
    ? /** @type {string} */ (ctx.fileDigest('data/bundle.json'))
    : 'sha256:' + canonicalSha256(bundle, ctx.services.sha256());
  if (ctx.bundleCanonical) {
    claims.proven(2, 'bundle.json is schema-valid and stored canonical', { path: 'data/bundle.json', observed: digest });
  } else {
    claims.failed(2, 'bundle.json is stored canonical', 'bytes differ from the JCS form', { path: 'data/bundle.json' });
  }
  if (options.expectBundleDigest != null) {
    claims.compare(2, 'bundle digest equals --expect-bundle-digest', options.expectBundleDigest, digest, {
      path: 'data/bundle.json',
      detail: ctx.archiveSha256 && options.expectBundleDigest === `sha256:${ctx.archiveSha256}`
        ? 'the digest given is the archive file\'s SHA-256 (what sha256sum prints), not the bundle digest; the bundle digest is the Bundle-Digest line of bag-info.txt'
        : 'the bundle is not the one expected (the bundle digest is the Bundle-Digest line of bag-info.txt, not the archive\'s sha256sum)',
    });
  }
  const head = bag.kept.get(HEAD_FILE);
  if (head === undefined) {
    claims.failed(2, 'bundle-head.json present', 'missing', { path: HEAD_FILE });
  } else {
    const expected = canonicalBytes(bundleHead(bundle, digest));
    if (bytesEqual(head, expected)) {
      claims.proven(2, 'bundle-head.json agrees with bundle.json', { path: HEAD_FILE });
    } else {
      claims.failed(2, 'bundle-head.json agrees with bundle.json', 'head differs from the one bundle.json gives', {
        path: HEAD_FILE, expected: ctx.digestOf(expected), observed: ctx.digestOf(head),
      });
    }
  }
  return digest;
}

/** @param {import('./verifyctx.mjs').Ctx} ctx @param {string} bundleDigest */
function checkBagit(ctx, bundleDigest) {
  const { bag, claims, bundle } = ctx;
  const files = bag.files;
  for (const path of sortedBy([...files.keys()].filter((p) => !p.startsWith('data/')))) {
    if (path.includes('/')) {
      claims.failed(1, 'only the known tag files, at the bag root', 'file outside data/ below the bag root (it would escape the bundle digest)', { path });
    } else if (!TAG_FILES.has(path)) {
      claims.failed(1, 'only the known tag files', 'unexpected file at the bag root', { path });
    }
  }
  for (const d of sortedBy([...bag.directories].filter((d) => d !== 'data' && !d.startsWith('data/')))) {
    claims.failed(1, 'only the known tag files, at the bag root', 'directory outside data/ (nothing but data/ and the tag files may be in a bag)', { path: d + '/' });
  }
  const bagit = bag.kept.get(BAGIT);
  if (bagit !== undefined && bytesEqual(bagit, ENC.encode(BAGIT_TXT))) {
    claims.proven(1, 'bagit.txt declares BagIt 1.0, UTF-8', { path: BAGIT });
  } else {
    claims.failed(1, 'bagit.txt declares BagIt 1.0, UTF-8', 'missing or different from the BagIt 1.0 declaration', { path: BAGIT });
  }
  /** @type {Record<string, Map<string, string>>} */
  const manifests = {};
  for (const name of [MANIFEST, TAG_MANIFEST]) {
    const data = bag.kept.get(name);
    if (data === undefined) {
      claims.failed(1, `${name} present`, 'missing', { path: name });
      manifests[name] = new Map();
      continue;
    }
    try {
      manifests[name] = parseManifest(data, name);
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      claims.failed(1, `${name} well-formed`, e.message, { path: name });
      manifests[name] = new Map();
    }
  }
  const dataFiles = [...files.keys()].filter((p) => p.startsWith('data/'));
  matchManifest(ctx, manifests[MANIFEST], new Set(dataFiles), MANIFEST);
  const tagFiles = [...files.keys()].filter((p) => !p.startsWith('data/') && p !== TAG_MANIFEST);
  matchManifest(ctx, manifests[TAG_MANIFEST], new Set(tagFiles), TAG_MANIFEST);
  const infoBytes = bag.kept.get(BAG_INFO);
  if (infoBytes === undefined) {
    claims.failed(1, 'bag-info.txt present', 'missing', { path: BAG_INFO });
    return;
  }
  let info;
  try {
    info = parseBagInfo(infoBytes, BAG_INFO);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    claims.failed(1, 'bag-info.txt well-formed', e.message, { path: BAG_INFO });
    return;
  }
  let payloadBytes = 0;
  for (const p of dataFiles) payloadBytes += /** @type {{size: number}} */ (files.get(p)).size;
  const oxum = `${payloadBytes}.${dataFiles.length}`;
  const declared = info.get('Payload-Oxum') ?? null;
  claims.compare(1, 'Payload-Oxum', declared, oxum, {
    path: BAG_INFO, detail: 'the data/ files present do not add up to the Payload-Oxum bag-info.txt declares',
  });
  const m = /^([0-9]{1,20})\.([0-9]{1,20})$/.exec(declared ?? '');
  /** @type {number|bigint} */
  let pb = payloadBytes;
  /** @type {number|bigint} */
  let fc = dataFiles.length;
  if (m) {
    pb = BigInt(m[1]);
    fc = BigInt(m[2]);
  }
  claims.compare(1, 'bag-info Bundle-Digest', bundleDigest, info.get('Bundle-Digest') ?? null, {
    path: BAG_INFO, detail: 'Bundle-Digest is not the digest of bundle.json',
  });
  const expectedInfo = bagInfoBytes(bundle, bundleDigest, pb, fc);
  claims.compare(1, 'bag-info.txt is what bundle.json gives', ctx.digestOf(expectedInfo), ctx.digestOf(infoBytes), {
    path: BAG_INFO, detail: 'bag-info.txt differs from the one bundle.json determines',
  });
}

/**
 * @param {import('./verifyctx.mjs').Ctx} ctx @param {Map<string, string>} listed
 * @param {Set<string>} present @param {string} name
 */
function matchManifest(ctx, listed, present, name) {
  const { claims, bag } = ctx;
  const files = bag.files;
  let bad = 0;
  for (const path of sortedBy(listed.keys())) {
    const f = files.get(path);
    const want = /** @type {string} */ (listed.get(path));
    if (f === undefined) {
      claims.failed(1, `${name} entry`, 'listed but not in the bag', { path, expected: 'sha256:' + want });
    } else if (f.sha256 !== want) {
      claims.failed(1, `${name} entry`, 'file does not match its manifest digest', { path, expected: 'sha256:' + want, observed: 'sha256:' + f.sha256 });
      bad++;
    }
  }
  for (const path of sortedBy([...present].filter((p) => !listed.has(p)))) {
    claims.failed(1, `${name} entry`, `file is not listed in ${name}`, { path, observed: 'sha256:' + /** @type {any} */ (files.get(path)).sha256 });
    bad++;
  }
  if (!bad && [...listed.keys()].every((p) => files.has(p))) claims.proven(1, `${name}: ${listed.size} files match`);
}
