// @ts-check
/**
 * Every signature present over the bundle head (SPEC 11.3): the embedded
 * bundle-head.json.sig and any sidecar given. Each is checked with the key it carries;
 * an embedded one that does not verify is a failed claim (the archive changed after it
 * was signed); a sidecar that does not verify is listed with its reason and fails
 * nothing by itself. With allowed signers, one valid signature by an allowed signer is
 * the trust anchor, and none is a failed claim.
 */
import { TrustError } from './errors.mjs';
import { HEAD_FILE, HEAD_SIG_FILE } from './bagit.mjs';
import { checkSignature, matchSigner, parseAllowedSigners } from './sshsig.mjs';
import { UTF8 } from './util.mjs';

/** Bounds on what lies beside a bundle (SPEC 6), as the Python verifier's. */
export const MAX_SIDECAR_BYTES = 64 * 1024;
export const MAX_SIDECARS = 64;
export const MAX_LISTED = 4096;
export const COUNTERSIGNATURE = /^\.sig\.([0-9a-f]{64})$/;
export const ODD_NAME = 'not read: named like a signature of this bundle, but neither <archive>.sig nor <archive>.sig.<sha256 hex of its bytes, lowercase>';

/**
 * The order sidecars are read in, and so which MAX_SIDECARS are read when more lie
 * beside a bundle: `first` (<archive>.sig), then oldest first by what the file system
 * recorded for each write (status-change time, then inode number for one clock tick;
 * no writer can set them back), then by name. A countersignature's name is chosen by
 * its writer, so name order alone would let a flood of names added later push out the
 * signatures already there.
 * @param {{name: string, time: bigint[]}[]} found @param {string} first
 */
export function orderSidecars(found, first) {
  /** @param {bigint[]} a @param {bigint[]} b */
  const older = (a, b) => {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const x = a[i] ?? 0n;
      const y = b[i] ?? 0n;
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  };
  return [...found]
    .sort((a, b) => Number(a.name !== first) - Number(b.name !== first) || older(a.time, b.time) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((f) => f.name);
}

/** Why the sidecars past MAX_SIDECARS are listed as not verifying. @param {number} rest */
export function tooMany(rest) {
  return `more than ${MAX_SIDECARS} signatures beside the bundle: ${rest} not read (the oldest are read, so none added later displaces them)`;
}

/**
 * @typedef {{where: string, embedded: boolean, state: 'verified'|'valid'|'not_allowed'|'invalid',
 *   key: string|null, identity: string|null, reason: string|null}} SignatureEntry
 * One signature present, as the record's `signatures` lists it (schemas/verification.schema.json).
 */

/**
 * @param {{where: string, embedded: boolean}} sig
 * @param {SignatureEntry['state']} state
 * @param {string|null} key
 * @param {string|null} identity
 * @param {string|null} reason
 * @returns {SignatureEntry}
 */
function entry(sig, state, key, identity, reason) {
  return { where: sig.where, embedded: sig.embedded, state, key, identity, reason };
}

/**
 * @param {import('./verifyctx.mjs').Ctx} ctx
 * @param {import('./verify.mjs').VerifyOptions} options
 * @returns {Promise<{signer: string|null, signatures: SignatureEntry[]}>}
 */
export async function signatureClaims(ctx, options) {
  const { claims, bag } = ctx;
  const head = bag.kept.get(HEAD_FILE);
  /** @type {{where: string, text: string|null, embedded: boolean, problem?: string|null}[]} */
  const present = [];
  const embedded = bag.kept.get(HEAD_SIG_FILE);
  if (embedded !== undefined) present.push({ where: HEAD_SIG_FILE, text: decode(embedded), embedded: true });
  for (const s of options.sidecars ?? []) {
    present.push({ where: s.name, text: s.problem ? '' : decode(s.text), embedded: false, problem: s.problem ?? null });
  }
  /** @type {SignatureEntry[]} */
  const signatures = [];
  let allowed = null;
  if (options.allowedSigners != null) {
    // Parsed by the caller first (a bad file is a usage/input error before any work);
    // parsed again here so the core holds the rule.
    allowed = parseAllowedSigners(options.allowedSigners, options.allowedSignersSource ?? 'allowed_signers');
  }
  const crypto = { sha256: options.sha256, sha512: options.sha512, verifyEd25519: options.verifyEd25519 };
  /** @type {string|null} */
  let signer = null;
  const notAllowed = [];
  for (const sig of present) {
    if (head === undefined) {
      if (sig.embedded) claims.failed(2, `signature ${sig.where}`, 'bundle-head.json is missing, nothing to check the signature against', { path: sig.where });
      signatures.push(entry(sig, 'invalid', null, null, 'bundle-head.json is missing, nothing to check the signature against'));
      continue;
    }
    if (sig.problem) {
      // Refused before any check (too large, one too many, altered, an odd name):
      // listed, never silently skipped, and a sidecar fails nothing by itself.
      signatures.push(entry(sig, 'invalid', null, null, `${sig.where}: ${sig.problem}`));
      continue;
    }
    let checked;
    try {
      if (sig.text === null) throw new TrustError(`${sig.where}: not UTF-8 text`);
      checked = await checkSignature(head, sig.text, sig.where, crypto);
    } catch (e) {
      if (!(e instanceof TrustError)) throw e;
      signatures.push(entry(sig, 'invalid', null, null, e.message));
      if (sig.embedded) claims.failed(2, `signature ${sig.where}`, e.message, { path: sig.where });
      continue;
    }
    if (allowed === null) {
      signatures.push(entry(sig, 'valid', checked.fingerprint, null, null));
      if (sig.embedded) claims.proven(2, `signature ${sig.where}`, { path: sig.where, observed: `key ${checked.fingerprint}` });
      continue;
    }
    try {
      const m = matchSigner(checked, allowed, options.identity ?? null, sig.where, Math.floor(Date.now() / 1000));
      const who = `${m.principal}, key ${m.fingerprint}`;
      signatures.push(entry(sig, 'verified', checked.fingerprint, m.principal, null));
      if (sig.embedded) claims.proven(2, `signature ${sig.where}`, { path: sig.where, observed: `key ${checked.fingerprint}` });
      if (signer === null) signer = who;
    } catch (e) {
      if (!(e instanceof TrustError)) throw e;
      signatures.push(entry(sig, 'not_allowed', checked.fingerprint, null, e.message));
      if (sig.embedded) claims.proven(2, `signature ${sig.where}`, { path: sig.where, observed: `key ${checked.fingerprint}` });
      notAllowed.push(e.message);
    }
  }
  if (allowed !== null) {
    const path = anchorPath(signatures);
    if (signer !== null) claims.proven(2, 'signature', { path, observed: signer });
    else if (head === undefined) claims.failed(2, 'signature', 'bundle-head.json is missing, nothing to check the signature against');
    else {
      const why = notAllowed.length ? notAllowed.join('; ') : present.length ? 'no signature verifies' : 'the bundle carries no signature and none was given';
      claims.failed(2, 'signature', `no signature by an allowed signer: ${why}`, { path });
    }
  }
  return { signer, signatures };
}

/**
 * The file the anchor claim names: the first signature that verified, else the first
 * one checked (embedded first, then the sidecars as given), else bundle-head.json.sig,
 * where a signature would be. A sidecar is named as given, never as the embedded file
 * it is not (the Python verifier's `anchor_path` is the same rule).
 * @param {SignatureEntry[]} signatures
 * @returns {string}
 */
export function anchorPath(signatures) {
  const first = signatures.find((s) => s.state === 'verified') ?? signatures[0];
  return first ? first.where : HEAD_SIG_FILE;
}

/** @param {Uint8Array} b */
function decode(b) {
  try {
    return UTF8.decode(b);
  } catch {
    return null;
  }
}
