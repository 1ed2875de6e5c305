// @ts-check
/**
 * check-proof (SPEC 11.4): a single case proven in a bundle head without the bundle.
 * Any layout of the same JSON is the same proof (every hash comes from canonical
 * bytes); SPEC 2's rejections still hold. The leaf is the case's JCS bytes, or
 * case_bytes, whose parse must give the case shown byte for byte in JCS; the path is
 * checked by RFC 9162 2.1.3.2; the head is anchored only by a valid signature from an
 * allowed signer, never by a digest alone. Exit 0 proven, 1 not proven, 3 malformed.
 */
import { JsonError, TrustError } from './errors.mjs';
import { parseJson, valueBound } from './json.mjs';
import { canonicalBytes, bytesEqual } from './jcs.mjs';
import { leafHash, rootFromPath } from './merkle.mjs';
import { checkSignature, matchSigner, parseAllowedSigners } from './sshsig.mjs';
import { shown } from './textsafe.mjs';

export const MAX_PROOF_BYTES = 8 * 1024 * 1024;
const MAX_PROOF_VALUES = 250_000;
const MAX_TREE_SIZE = 65536;
const MAX_AUDIT_PATH = 16;
const UNANCHORED = 'none: unanchored (the head is whatever the proof says; give --allowed-signers to check who signed it)';

class Malformed extends Error {}
class NotProven extends Error {}

/**
 * @param {Uint8Array} data the proof file's bytes
 * @param {{source: string, sha256: import('./bagread.mjs').HashFactory, sha512: (d: Uint8Array) => Promise<Uint8Array>,
 *   verifyEd25519: (k: Uint8Array, s: Uint8Array, m: Uint8Array) => Promise<boolean>,
 *   validators: Record<string, import('./schema.mjs').Validator>, allowedSigners?: string|null,
 *   allowedSignersSource?: string, identity?: string|null, expectBundleDigest?: string|null}} options
 */
export async function checkProof(data, options) {
  const { source } = options;
  const base = { schema: 'evalbook.proof_check.v1', source };
  try {
    const proof = parseProof(data, options);
    const root = rootFromPath(options.sha256, proof.leafIndex, proof.treeSize, leafHash(options.sha256, proof.leaf), proof.path);
    if (root === null || root !== proof.root) {
      throw new NotProven(`${shown(source)}: the case is not proven in the tree of the head: the audit path does not lead to the root for leaf ${proof.leafIndex} of ${proof.treeSize}`);
    }
    const { anchor, signer } = await anchorOf(proof, options);
    return {
      ...base, proven: true, exit_code: 0, case_id: proof.caseId, leaf_index: proof.leafIndex, tree_size: proof.treeSize,
      bundle_digest: proof.head.bundle_digest, report_id: proof.head.report_id, anchored: signer !== null,
      anchor: { signer, expected_bundle_digest: options.expectBundleDigest ?? null, self_consistent_only: signer === null, description: anchor },
      ...caseShown(proof.case),
    };
  } catch (e) {
    if (e instanceof Malformed) return { ...base, proven: false, exit_code: 3, error: `malformed proof: ${e.message}`, reason: `malformed proof: ${e.message}` };
    if (e instanceof NotProven) return { ...base, proven: false, exit_code: 1, reason: e.message };
    throw e;
  }
}

/**
 * The proven case's status and score as the case shows them (`case_status`,
 * `case_score`), each only when it is a string and a number: what the auditor reads
 * beside "proven" is what the leaf holds. (A JSON number has one value whatever its
 * spelling, so 1.0 and 1 are shown alike.)
 * @param {any} c
 */
function caseShown(c) {
  /** @type {{case_status?: string, case_score?: number}} */
  const shown = {};
  if (typeof c.status === 'string') shown.case_status = c.status;
  if (typeof c.score === 'number') shown.case_score = c.score;
  return shown;
}

/**
 * @param {Uint8Array} data
 * @param {Parameters<typeof checkProof>[1]} options
 */
function parseProof(data, options) {
  const { source } = options;
  if (data.length > MAX_PROOF_BYTES) throw new Malformed(`${source}: proof of ${data.length} bytes, over the ${MAX_PROOF_BYTES} bytes a proof may hold (refused before parsing)`);
  if (valueBound(data) > MAX_PROOF_VALUES) throw new Malformed(`${source}: more than ${MAX_PROOF_VALUES} values (refused before parsing)`);
  let proof;
  try {
    proof = /** @type {any} */ (parseJson(data, source));
  } catch (e) {
    if (e instanceof JsonError) throw new Malformed(e.message);
    throw e;
  }
  const problem = options.validators['case-proof'].problem(proof);
  if (problem !== null) throw new Malformed(`${source}: ${problem}`);
  const head = proof.head;
  const tree = head.cases_tree;
  const integer = (/** @type {unknown} */ v, /** @type {string} */ name, /** @type {number} */ max) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) throw new Malformed(`${source}: ${name} must be an integer from 0 to ${max}`);
    return v;
  };
  const leafIndex = integer(proof.leaf_index, 'leaf_index', MAX_TREE_SIZE - 1);
  const treeSize = integer(tree.tree_size, 'head.cases_tree.tree_size', MAX_TREE_SIZE);
  if (proof.audit_path.length > MAX_AUDIT_PATH) throw new Malformed(`${source}: audit_path has ${proof.audit_path.length} hashes`);
  const hash = (/** @type {unknown} */ v, /** @type {string} */ name) => {
    if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) throw new Malformed(`${source}: ${name} must be 64 lowercase hex digits (32 bytes)`);
    return v;
  };
  const root = hash(tree.root, 'head.cases_tree.root');
  const path = proof.audit_path.map((/** @type {unknown} */ h, /** @type {number} */ i) => hash(h, `audit_path[${i}]`));
  const key = Object.prototype.hasOwnProperty.call(proof.case, 'case_id') ? 'case_id' : 'check_id';
  const caseId = proof.case[key];
  if (typeof caseId !== 'string') throw new Malformed(`${source}: case.${key} must be a string (the case's id; check_id for an eval-banana check)`);
  let leaf = canonicalBytes(proof.case);
  if (Object.prototype.hasOwnProperty.call(proof, 'case_bytes')) {
    const encoded = proof.case_bytes;
    let raw;
    try {
      const bin = atob(encoded);
      raw = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) raw[i] = bin.charCodeAt(i);
    } catch {
      throw new Malformed(`${source}: case_bytes is not base64`);
    }
    let again = '';
    for (let i = 0; i < raw.length; i++) again += String.fromCharCode(raw[i]);
    if (encoded.length % 4 !== 0 || btoa(again) !== encoded) throw new Malformed(`${source}: case_bytes is not in canonical base64 (RFC 4648)`);
    let parsed;
    try {
      parsed = parseJson(raw, `${source}: case_bytes`);
    } catch (e) {
      if (e instanceof JsonError) throw new Malformed(e.message);
      throw e;
    }
    if (!bytesEqual(canonicalBytes(parsed), leaf)) {
      throw new NotProven(`${shown(source)}: case_bytes do not hold the case shown; the leaf proven would not be the case you read`);
    }
    leaf = raw;
  }
  return { head, headSignature: proof.head_signature, caseId, case: proof.case, leaf, leafIndex, treeSize, root, path };
}

/**
 * @param {ReturnType<typeof parseProof>} proof @param {Parameters<typeof checkProof>[1]} options
 * @returns {Promise<{anchor: string, signer: string|null}>}
 */
async function anchorOf(proof, options) {
  const where = shown(options.source);
  const headBytes = canonicalBytes(proof.head);
  const crypto = { sha256: options.sha256, sha512: options.sha512, verifyEd25519: options.verifyEd25519 };
  let checked = null;
  if (proof.headSignature !== null) {
    // A signature present is always checked, with the key it carries (SPEC 11.3).
    try {
      checked = await checkSignature(headBytes, proof.headSignature, 'head_signature', crypto);
    } catch (e) {
      if (!(e instanceof TrustError)) throw e;
      throw new NotProven(`${where}: head signature: ${shown(e.message)}`);
    }
  }
  if (options.allowedSigners == null) {
    if (options.expectBundleDigest != null) {
      throw new NotProven(`${where}: --expect-bundle-digest alone cannot anchor a proof: the head is whatever the proof's author wrote, and anyone who knows a bundle digest can build a one-leaf head naming it; give --allowed-signers to check the head's signature, or verify the bundle itself`);
    }
    return { anchor: UNANCHORED, signer: null };
  }
  if (checked === null) {
    throw new NotProven(`${where}: the head has no signature (head_signature is null), so nothing binds it to a signer${options.expectBundleDigest == null ? '' : ' or to the expected bundle'}`);
  }
  let signer;
  try {
    const allowed = parseAllowedSigners(options.allowedSigners, options.allowedSignersSource ?? 'allowed_signers');
    const m = matchSigner(checked, allowed, options.identity ?? null, 'head_signature', Math.floor(Date.now() / 1000));
    signer = `${m.principal}, key ${m.fingerprint}`;
  } catch (e) {
    if (!(e instanceof TrustError)) throw e;
    throw new NotProven(`${where}: head signature: ${shown(e.message)}`);
  }
  let anchor = `signed by ${signer}`;
  if (options.expectBundleDigest != null) {
    if (proof.head.bundle_digest !== options.expectBundleDigest) {
      throw new NotProven(`${where}: the signed head names bundle ${proof.head.bundle_digest}, expected ${shown(options.expectBundleDigest)}`);
    }
    anchor += `; the signed head names the expected bundle ${options.expectBundleDigest}`;
  }
  return { anchor, signer };
}

/** @param {any} r */
export function proofLines(r) {
  if (r.exit_code === 3) return [`Proof:       ${shown(r.source)}`, `Result:      ERROR (${shown(r.error)})`];
  if (!r.proven) return [`Proof:       ${shown(r.source)}`, `Result:      NOT PROVEN`, `Reason:      ${shown(r.reason)}`];
  const status = r.case_status === undefined ? '' : `status ${shown(r.case_status)}${r.case_score === undefined ? '' : `, score ${r.case_score}`}, `;
  return [
    `Proof:       ${shown(r.source)}`,
    `Case:        ${shown(r.case_id)} (${status}leaf ${r.leaf_index} of ${r.tree_size})`,
    `Bundle:      ${r.bundle_digest}  report ${shown(r.report_id)}`,
    `Anchor:      ${shown(r.anchor.description)}`,
    `Result:      PROVEN`,
  ];
}
