// @ts-check
/**
 * The verification record of SPEC 5 (schemas/verification.schema.json), and the human
 * summary printed from it.
 */
import { shown, shownClipped } from './textsafe.mjs';

export const TOOL = { name: 'verify-bundle.mjs', version: '0.1.0' };

export const REASON_WORDS = /** @type {Record<string, string>} */ ({
  payload_at_sso: "the payload is over 262,144 bytes and kept in the store's large-object area (SSO), which bundles do not carry, so its digest is listed, not its bytes",
  removed_by_retention: "the dataset's retention policy removed the example body (named in retention.jsonl), so only its digest remains",
  scorer_version_missing: 'the scorer version the report pins no longer exists in the store',
  scorer_digest_mismatch: 'the pinned scorer version exists but now hashes differently from the digest the report pins (the observed digest is in the detail), so it is left out',
  case_limit: 'the check has cases beyond the bundle\'s limit of 20,000 cases (counted over checks in report order); those cases are counted, not included',
  digest_mismatch: 'the stored bytes no longer match the digest that refers to them, so the exporter left them out rather than write bytes that cannot prove anything',
  missing_from_store: 'the item is referred to but was absent from the store the bundle was exported from',
  no_dataset_read_body: 'the exporting principal may not read dataset example bodies (lacks dataset.read_body), so the examples and case outputs are listed, not included',
  trace_capture_policy: 'trace bodies stay in the tracing system by policy and are never exported; only their digests are listed',
  definition_missing: "the check's definition (its YAML or the script it names) was not found under the project root",
  definition_digest_mismatch: "the check's definition no longer gives the check_definition_sha256 the run recorded (it changed after the run; the observed digest is in the detail)",
});

function now() {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * @param {{expectBundleDigest?: string|null, expectReportDigest?: string|null}} options
 * @param {string|null} signer
 */
function anchor(options, signer) {
  const b = options.expectBundleDigest ?? null;
  const r = options.expectReportDigest ?? null;
  const parts = [];
  if (signer) parts.push(`signed by ${signer}`);
  if (b) parts.push(`expected bundle digest ${b}`);
  if (r) parts.push(`expected report digest ${r}`);
  return {
    expected_bundle_digest: b,
    expected_report_digest: r,
    signer,
    self_consistent_only: !(b || r || signer),
    description: parts.length ? parts.join('; ') : 'none: this result shows self-consistency only, not who made the bundle',
  };
}

/**
 * @param {import('./verify.mjs').VerifyOptions} options
 * @param {string} message
 * @param {{sha256: string, size: number}|null} archive
 */
export function errorRecord(options, message, archive) {
  return {
    schema: 'evalbook.verification.v1',
    tool: options.tool ?? TOOL,
    verified_at: (options.now ?? now)(),
    source: options.source,
    archive,
    verdict: 'error',
    bundle_schema: null,
    bundle_digest: null,
    report_id: null,
    report_digest: null,
    report_result: null,
    report_issued_at: null,
    envelope: null,
    anchor: anchor(options, null),
    strict: !!options.strict,
    counts: { proven: 0, unprovable: 0, failed: 0 },
    unprovable_by_reason: {},
    strict_forecast: null,
    error: message,
    summary: {},
    claims: [],
    signatures: [],
  };
}

/**
 * @param {import('./verify.mjs').VerifyOptions} options
 * @param {any} f facts: schema, bundleDigest, reportId, reportDigest, reportResult,
 *   reportIssuedAt, envelope, summary, signer, claims, archive
 */
export function makeRecord(options, f) {
  /** @type {import('./claims.mjs').Claim[]} */
  const claims = f.claims;
  const counts = { proven: 0, unprovable: 0, failed: 0 };
  /** @type {Record<string, number>} */
  const byReason = {};
  for (const c of claims) {
    counts[c.state]++;
    if (c.state === 'unprovable') byReason[c.reason ?? 'unknown'] = (byReason[c.reason ?? 'unknown'] ?? 0) + 1;
  }
  const sortedReasons = Object.fromEntries(Object.entries(byReason).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const verdict = counts.failed ? 'failed' : 'verified';
  const forecast = !options.strict && verdict === 'verified' && counts.unprovable
    ? `FAILED (${counts.unprovable} unprovable ${counts.unprovable === 1 ? 'claim' : 'claims'} would fail)`
    : null;
  const record = {
    schema: 'evalbook.verification.v1',
    tool: options.tool ?? TOOL,
    verified_at: (options.now ?? now)(),
    source: options.source,
    archive: f.archive,
    verdict,
    bundle_schema: f.schema,
    bundle_digest: f.bundleDigest,
    report_id: f.reportId,
    report_digest: f.reportDigest,
    report_result: f.reportResult,
    report_issued_at: f.reportIssuedAt,
    envelope: f.envelope,
    anchor: anchor(options, f.signer),
    strict: !!options.strict,
    counts,
    unprovable_by_reason: sortedReasons,
    strict_forecast: forecast,
    error: null,
    summary: f.summary,
    claims,
  };
  // Every signature present and its state (SPEC 11.3), as the Python verifier lists them.
  record.signatures = f.signatures ?? [];
  return record;
}

/**
 * A verification record as JSON text in pieces of about `pieceChars` characters, its
 * claims last (the pieces joined are one JSON object, no newline): a hostile bundle can
 * give 130,000 failed claims with long names, a record of 100 MB and more, and neither
 * the Node command nor the page (saving it) ever holds it as one string. Pieces are cut
 * by size, not by a count of claims: a thousand claims of 4 KB names outside Latin-1
 * (two bytes a character in V8) and full of quotes were 32 MB a piece, and the Node
 * command's peak went past 600 MB. And small: a piece of at most 64 KB stays among the
 * young objects a scavenge frees at once; one of megabytes goes to the large-object
 * space, freed only by a full collection (pieces of 1 M characters: 397 MB, of 32 K:
 * 310 MB, on 62,900 names of one Latin-1 letter and quotes).
 * @param {Record<string, any>} record
 * @param {number} [pieceChars] characters a piece, about
 * @returns {Generator<string>}
 */
export function* recordPieces(record, pieceChars = 1 << 15) {
  const { claims, ...rest } = record;
  // The exit code, where there is one, just before the claims (the command's spool sets
  // its digit once the run's code is known).
  if ('exit_code' in rest) {
    const code = rest.exit_code;
    delete rest.exit_code;
    rest.exit_code = code;
  }
  const head = JSON.stringify({ ...rest, claims: [] });
  yield head.slice(0, -2);
  /** @type {string[]} */
  let batch = [];
  let size = 0;
  for (let i = 0; i < claims.length; i++) {
    const text = JSON.stringify(claims[i]);
    batch.push(i ? ',' + text : text);
    size += text.length + 1;
    if (size >= pieceChars) {
      yield batch.join('');
      batch = [];
      size = 0;
    }
  }
  if (batch.length) yield batch.join('');
  yield ']}';
}

/** @param {import('./signatures.mjs').SignatureEntry} sig @returns {string} */
export function signatureLine(sig) {
  if (sig.state === 'verified') return `verified, signed by ${shown(sig.identity ?? '')}, key ${shown(sig.key ?? '')}`;
  if (sig.state === 'valid') return `valid, signed by key ${shown(sig.key ?? '')} (not anchored: pass --allowed-signers to check who)`;
  if (sig.state === 'not_allowed') return `valid, not allowed (${shown(sig.reason ?? '')})`;
  return `does not verify (${shown(sig.reason ?? '')})`;
}

/** Failed claims the console summary lists (the Python verifier's number). */
export const MAX_FAILURES_LISTED = 50;

/** @param {any} r @returns {string[]} */
export function humanLines(r) {
  const out = [];
  out.push(`Bundle:      ${shown(r.source)}`);
  if (r.archive) out.push(`Archive:     ${r.archive.size} bytes, SHA-256 ${r.archive.sha256}  (sha256sum of the file)`);
  if (r.verdict === 'error') {
    out.push(`Verdict:     ERROR (no verdict possible)`);
    out.push(`Error:       ${shownClipped(r.error)}`);
    return out;
  }
  out.push(`Digest:      ${r.bundle_digest}  (bundle digest: JSON digest of data/bundle.json)`);
  out.push(`Report:      ${shown(r.report_id)}  ${r.report_digest}`);
  if (r.report_result !== null) out.push(`Result:      ${shown(r.report_result)}  (the report's own result, as issued)`);
  if (r.envelope) {
    const e = r.envelope;
    if (e.status === 'superseded') {
      out.push(`Envelope:    superseded by ${shown(e.superseded_by)} at ${shown(e.superseded_at)}: ${shown(e.reason)}`);
    } else out.push(`Envelope:    ${shown(e.status)}  (not superseded when exported)`);
  }
  const s = r.summary || {};
  if (s.run_id !== undefined) {
    // eval-banana's console labels as recomputed (Run ID, Score, Percentage, Passed).
    for (const [label, value] of s.labels ?? [['Run ID', s.run_id]]) {
      out.push(`${`${shown(label)}:`.padEnd(12)} ${shown(value)}`);
    }
  }
  for (const sig of r.signatures || []) out.push(`Signature:   ${shown(sig.where)}: ${signatureLine(sig)}`);
  out.push(`Anchor:      ${shown(r.anchor.description)}`);
  out.push(`Verdict:     ${r.verdict === 'verified' ? 'VERIFIED' : 'FAILED'}${r.strict_forecast ? `  (--strict: ${r.strict_forecast})` : ''}`);
  out.push(`Proven:      ${r.counts.proven} claims`);
  out.push(`Unprovable:  ${r.counts.unprovable} claims`);
  for (const [reason, n] of Object.entries(r.unprovable_by_reason)) {
    out.push(`  ${reason}: ${n} - ${REASON_WORDS[reason] ?? 'a reason this contract does not define'}`);
  }
  out.push(`Failed:      ${r.counts.failed} claims`);
  let listed = 0;
  for (const c of r.claims) {
    if (c.state !== 'failed') continue;
    // The summary names the first failures, as `evalbook-bundle verify` does; the record
    // (--json) holds every one. A hostile bundle's 122,000 would make 250 MB of text.
    if (listed === MAX_FAILURES_LISTED) {
      out.push(`  ... and ${r.counts.failed - listed} more (see --json)`);
      break;
    }
    listed++;
    let line = `  [${c.group} ${c.group_name}] ${shownClipped(c.subject)}: ${shownClipped(c.detail)}`;
    if (c.path) line += `  (${shownClipped(c.path)})`;
    out.push(line);
    if (c.expected !== null || c.observed !== null) out.push(`      expected ${shownClipped(c.expected)}, observed ${shownClipped(c.observed)}`);
  }
  out.push(`Checked at:  ${r.verified_at} by ${r.tool.name} ${r.tool.version}`);
  return out;
}
