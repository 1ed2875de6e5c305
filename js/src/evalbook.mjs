// @ts-check
/**
 * Claim groups 3 to 11 of an EvalBook bundle (SPEC 5): the report (3), suite (4),
 * scorers (5), datasets and examples (6), check results and case files (7), cases,
 * the case tree and payloads (8), evidence refs (9), accounting (10, with the listing
 * rules of listing.mjs) and coherence (11).
 */
import { checkBagFrame } from './bagit.mjs';
import { framedDigest, SCORER_TAG } from './framed.mjs';
import { listingProblems, refOf } from './listing.mjs';
import { TreeBuilder } from './merkle.mjs';
import { JsonError } from './errors.mjs';
import { loadJson, parseKept, byteOrder, sortedBy } from './util.mjs';

const INLINE_MAX = 262144;
const MAX_EVIDENCE_REFS = 20;
const READ_BODY = 'dataset.read_body';
const EXPORT = 'report.export';
const PAYLOAD_KINDS = new Set(['output', 'trace', 'artifact']);
const IMPORT_PRODUCERS = new Set(['evalbook-bundle/import-inspect', 'evalbook-bundle/import-lm-eval']);

/**
 * @param {import('./verifyctx.mjs').Ctx} ctx
 */
export function verifyEvalBook(ctx) {
  const v = new EvalBookClaims(ctx);
  return v.run();
}

class EvalBookClaims {
  /** @param {import('./verifyctx.mjs').Ctx} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.claims = ctx.claims;
    this.bundle = ctx.bundle;
    this.bag = ctx.bag;
    /** @type {any} */
    this.report = null;
    /** @type {any} */
    this.envelope = null;
    this.named = new Set(['data/bundle.json']);
    /** @type {Map<string, {kind: string, location: string, checkId: string, size: number}[]>} */
    this.caseRefs = new Map();
    /** @type {Map<string, [string, number, string]>} */
    this.examplesUsed = new Map();
    this.readBody = this.bundle.exporter.permissions.includes(READ_BODY);
    this.casesUnknown = false;
    /** @type {Set<string>} */
    this.checksUnknown = new Set();
    // The listed entries as read, in order, never copied (a bundle.json within its cap
    // can list 150,000): kind -> ref -> the first entry listing it; digest -> the first
    // payload entry whose ref is that digest. (A redacted entry has no detail.)
    this.listedCount = this.bundle.unavailable.length + this.bundle.redacted.length;
    /** @type {Map<string, Map<string, any>>} */
    this.byKind = new Map();
    /** @type {Map<string, any>} */
    this.payloadByDigest = new Map();
    for (const e of [...this.bundle.unavailable, ...this.bundle.redacted]) {
      const refs = this.byKind.get(e.kind) ?? this.byKind.set(e.kind, new Map()).get(e.kind);
      if (!refs.has(e.ref)) refs.set(e.ref, e);
      if (PAYLOAD_KINDS.has(e.kind) && e.digest === e.ref && !this.payloadByDigest.has(e.ref)) this.payloadByDigest.set(e.ref, e);
    }
  }

  /** @param {string} kind @param {string} ref */
  listing(kind, ref) {
    return this.byKind.get(kind)?.get(ref) ?? null;
  }

  /** @param {string} digest */
  listedPayload(digest) {
    return this.payloadByDigest.get(digest) ?? null;
  }

  /** @param {number} group @param {string} kind @param {string} ref @param {string} subject @param {string|null} [path] */
  listedOrFailed(group, kind, ref, subject, path = null) {
    const e = this.listing(kind, ref);
    if (e) this.claims.unprovable(group, subject, e.reason, { path, expected: e.digest, detail: e.detail });
    else this.claims.failed(group, subject, 'neither in the bundle nor listed as unavailable or redacted', { path });
  }

  run() {
    const digest = checkBagFrame(this.ctx, `evalbook-bundle-${this.bundle.report.report_id}`);
    this.checkReport();
    this.checkSuite();
    this.checkScorers();
    const manifests = this.checkDatasets();
    this.checkChecksAndCases();
    this.checkExamples(manifests);
    this.checkPayloads();
    this.checkEvidenceRefs();
    this.checkAccounting(manifests);
    this.checkCoherence();
    return {
      bundleDigest: digest,
      reportId: this.bundle.report.report_id,
      reportDigest: this.bundle.report.digest,
      reportResult: this.report ? this.report.result : null,
      reportIssuedAt: this.report ? this.report.issued_at ?? null : null,
      envelope: this.envelope,
      summary: {},
    };
  }

  // -- 3: report
  checkReport() {
    const entry = this.bundle.report;
    const path = entry.path;
    this.named.add(path);
    this.named.add(entry.envelope.path);
    const observed = this.ctx.fileDigest(path);
    this.claims.compare(3, 'report body sha256', entry.digest, observed, { path });
    const expect = this.ctx.options.expectReportDigest;
    if (expect != null) {
      this.claims.compare(3, 'report digest equals --expect-report-digest', expect, observed, { path, detail: 'the report is not the one expected' });
    }
    const [value, problem] = parseKept(this.bag, path, true);
    if (value === undefined) {
      this.claims.failed(3, 'report body is canonical JSON', problem || 'unreadable', { path });
      return;
    }
    const sp = this.ctx.schemaProblem('report-body', value, path);
    if (sp) {
      this.claims.failed(3, 'report body is schema-valid', sp, { path });
      return;
    }
    this.claims.proven(3, 'report body is canonical and schema-valid', { path });
    this.report = value;
    if (value.report_id !== entry.report_id || value.evaluation_id !== entry.evaluation_id) {
      this.claims.failed(3, 'report ids agree with bundle.json', 'report_id or evaluation_id differs', { path, expected: entry.report_id, observed: value.report_id });
    }
    const env = entry.envelope;
    this.claims.compare(3, 'envelope sha256', env.digest, this.ctx.fileDigest(env.path), { path: env.path });
    const [ev, eproblem] = parseKept(this.bag, env.path, false);
    if (ev === undefined || ev === null || typeof ev !== 'object' || Array.isArray(ev)) {
      this.claims.failed(3, 'envelope is JSON', eproblem || 'not an object', { path: env.path });
      return;
    }
    const esp = this.ctx.schemaProblem('envelope', ev, env.path) ?? supersessionProblem(value, ev, env.path);
    if (esp) {
      this.claims.failed(3, 'envelope is schema-valid', esp, { path: env.path });
      return;
    }
    this.envelope = { status: ev.status, superseded_by: ev.superseded_by, superseded_at: ev.superseded_at, reason: ev.superseded_reason };
    this.claims.compare(3, 'envelope status', env.status, ev.status, { path: env.path, detail: 'status differs from bundle.json' });
  }

  // -- 4: suite
  checkSuite() {
    if (!this.report) return;
    const ref = this.report.suite_ref;
    const entry = this.bundle.suite;
    const item = refOf(ref.id, ref.version);
    if (entry.suite_id !== ref.id || entry.version !== ref.version || entry.digest !== ref.digest) {
      this.claims.failed(4, `suite ${item}`, "bundle.json's suite differs from the report's suite_ref", { expected: ref.digest, observed: entry.digest });
    }
    if (entry.path === null) {
      this.listedOrFailed(4, 'suite', item, `suite ${item}`);
      return;
    }
    this.named.add(entry.path);
    const [value, problem] = parseKept(this.bag, entry.path, true);
    if (value === undefined) {
      this.claims.failed(4, `suite ${item}`, problem || 'unreadable', { path: entry.path, expected: ref.digest });
      return;
    }
    this.claims.compare(4, `suite ${item} JSON digest`, ref.digest, this.ctx.fileDigest(entry.path), { path: entry.path });
    const sp = this.ctx.schemaProblem('suite', value, entry.path);
    if (sp) {
      this.claims.failed(11, `suite ${item} is schema-valid`, sp, { path: entry.path });
      return;
    }
    if (value.suite_id !== ref.id || value.version !== ref.version) {
      this.claims.failed(11, `suite ${item} names itself`, "suite_id or version inside differs from the report's suite_ref", { path: entry.path, expected: item, observed: refOf(value.suite_id, value.version) });
    }
  }

  // -- 5: scorers
  checkScorers() {
    if (!this.report) return;
    /** @type {Map<string, Set<string>>} */
    const pinned = new Map();
    for (const c of this.report.checks) {
      const item = refOf(c.scorer_ref.id, c.scorer_ref.version);
      if (!pinned.has(item)) pinned.set(item, new Set());
      /** @type {Set<string>} */ (pinned.get(item)).add(c.scorer_ref.digest);
    }
    /** @type {Map<string, any>} */
    const exported = new Map();
    for (const s of this.bundle.scorers) exported.set(refOf(s.scorer_id, s.version), s);
    for (const item of sortedBy(pinned.keys())) {
      const entry = exported.get(item);
      if (entry === undefined) {
        this.listedOrFailed(5, 'scorer', item, `scorer ${item}`);
        continue;
      }
      const observed = this.scorerDigest(entry);
      const pins = sortedBy(/** @type {Set<string>} */ (pinned.get(item)));
      for (const d of pins) this.claims.compare(5, `scorer ${item} framed digest`, d, observed, { path: entry.path });
      if (!pins.includes(entry.digest)) {
        this.claims.failed(5, `scorer ${item}`, "bundle.json's scorer digest is not the pinned one", { expected: pins[0], observed: entry.digest });
      }
    }
    for (const item of sortedBy([...exported.keys()].filter((k) => !pinned.has(k)))) {
      this.claims.failed(5, `scorer ${item}`, 'exported scorer that no report check pins', { path: exported.get(item).path });
    }
  }

  /** @param {any} entry */
  scorerDigest(entry) {
    const base = entry.path;
    const descPath = `${base}/scorer.json`;
    this.named.add(descPath);
    const item = refOf(entry.scorer_id, entry.version);
    const [value, problem] = parseKept(this.bag, descPath, true);
    if (value === undefined) {
      this.claims.failed(5, `scorer ${item} descriptor`, problem || 'malformed', { path: descPath });
      return null;
    }
    const sp = this.ctx.schemaProblem('scorer', value, descPath);
    if (sp) {
      this.claims.failed(11, `scorer ${item} descriptor is schema-valid`, sp, { path: descPath });
      return null;
    }
    if (value.scorer_id !== entry.scorer_id || value.version !== entry.version) {
      this.claims.failed(11, `scorer ${item} names itself`, 'scorer_id or version inside differs from bundle.json', { path: descPath, expected: item, observed: refOf(value.scorer_id, value.version) });
    }
    /** @type {[string, Uint8Array][]} */
    const comps = [['scorer.json', /** @type {Uint8Array} */ (this.bag.kept.get(descPath))]];
    for (const rel of sortedBy([...value.files].map(String))) {
      const path = `${base}/files/${rel}`;
      this.named.add(path);
      const data = this.bag.kept.get(path);
      if (data === undefined) {
        this.claims.failed(5, `scorer ${item} file`, 'listed in scorer.json but missing', { path });
        return null;
      }
      comps.push([`files/${rel}`, data]);
    }
    return framedDigest(this.ctx.services.sha256, SCORER_TAG, comps);
  }

  // -- 6: datasets
  checkDatasets() {
    /** @type {Map<string, Map<string, string>>} */
    const manifests = new Map();
    if (!this.report) return manifests;
    /** @type {Map<string, string>} */
    const refs = new Map();
    for (const r of this.report.dataset_refs) refs.set(refOf(r.id, r.version), r.digest);
    /** @type {Map<string, any>} */
    const exported = new Map();
    for (const d of this.bundle.datasets) exported.set(refOf(d.dataset_id, d.version), d);
    for (const item of sortedDatasetKeys(refs.keys())) {
      const entry = exported.get(item);
      const pinned = /** @type {string} */ (refs.get(item));
      if (entry === undefined) {
        this.listedOrFailed(6, 'dataset', item, `dataset ${item}`);
        continue;
      }
      this.named.add(entry.path);
      const [value, problem] = parseKept(this.bag, entry.path, true);
      if (value === undefined) {
        this.claims.failed(6, `dataset ${item} manifest`, problem || 'unreadable', { path: entry.path, expected: pinned });
        continue;
      }
      const ok = this.claims.compare(6, `dataset ${item} manifest JSON digest`, pinned, this.ctx.fileDigest(entry.path), { path: entry.path });
      if (entry.digest !== pinned) {
        this.claims.failed(6, `dataset ${item}`, "bundle.json's digest is not the report's", { expected: pinned, observed: entry.digest });
      }
      if (ok) {
        const sp = this.ctx.schemaProblem('dataset-manifest', value, entry.path);
        if (sp) {
          this.claims.failed(6, `dataset ${item} manifest is schema-valid`, sp, { path: entry.path });
        } else {
          const ids = value.examples.map((/** @type {any} */ e) => e.example_id);
          const sorted = sortedBy(new Set(ids));
          if (ids.length !== sorted.length || ids.some((/** @type {string} */ x, /** @type {number} */ i) => x !== sorted[i])) {
            this.claims.failed(11, `dataset ${item} manifest`, 'examples must be unique and sorted by example_id', { path: entry.path });
          }
          manifests.set(item, new Map(value.examples.map((/** @type {any} */ e) => [e.example_id, e.digest])));
        }
      }
    }
    for (const item of sortedDatasetKeys([...exported.keys()].filter((k) => !refs.has(k)))) {
      this.claims.failed(6, `dataset ${item}`, 'exported dataset the report does not reference', { path: exported.get(item).path });
    }
    return manifests;
  }

  /** @param {Map<string, Map<string, string>>} manifests */
  checkExamples(manifests) {
    const listedInBundle = new Set();
    for (const d of this.bundle.datasets) {
      const key = refOf(d.dataset_id, d.version);
      for (const e of d.examples) {
        const item = `${key}/${e.example_id}`;
        listedInBundle.add(item);
        if (e.path !== null) this.named.add(e.path);
        if (!this.examplesUsed.has(item) && !this.casesUnknown) {
          this.claims.failed(10, `example ${item}`, 'bundle.json lists an example that no exported case uses', { path: e.path });
        }
        const md = manifests.get(key)?.get(e.example_id);
        if (md === undefined) {
          const why = manifests.has(key) ? 'not in the dataset manifest' : "no dataset manifest to find it in (its dataset's claim says why)";
          this.claims.failed(6, `example ${item}`, why, { observed: e.digest });
          continue;
        }
        if (e.digest !== md) {
          this.claims.failed(6, `example ${item}`, "bundle.json's digest differs from the manifest", { expected: md, observed: e.digest });
        }
        if (e.path === null) {
          this.listedOrFailed(6, 'example', item, `example ${item}`);
          continue;
        }
        this.claims.compare(6, `example ${item} sha256`, md, this.ctx.fileDigest(e.path), { path: e.path });
      }
    }
    const unlisted = [...this.examplesUsed.entries()].filter(([k]) => !listedInBundle.has(k));
    unlisted.sort((a, b) => cmpTriple(a[1], b[1]));
    for (const [item] of unlisted) this.listedOrFailed(6, 'example', item, `example ${item} used by a case`);
  }

  // -- 7 and 8: checks and cases
  checkChecksAndCases() {
    if (!this.report) return;
    const reportIds = this.report.checks.map((/** @type {any} */ c) => c.check_id);
    const bundleIds = this.bundle.checks.map((/** @type {any} */ c) => c.check_id);
    if (reportIds.join('\u0000') !== bundleIds.join('\u0000') || reportIds.length !== bundleIds.length) {
      this.claims.failed(7, 'checks in bundle.json follow the report', 'check ids or order differ', { expected: reportIds.join(','), observed: bundleIds.join(',') });
    }
    /** @type {Map<string, boolean>} */
    const required = new Map();
    for (const c of this.report.checks) required.set(c.check_id, c.required);
    const tree = new TreeBuilder(this.ctx.services.sha256, this.ctx.services.sha256Bytes);
    let remaining = this.bundle.limits.max_cases;
    for (const entry of this.bundle.checks) {
      const checkId = entry.check_id;
      if (entry.path === null) {
        this.listedOrFailed(7, 'check', checkId, `check result ${checkId}`);
      } else if (!this.ctx.present(entry.path)) {
        this.named.add(entry.path);
        this.claims.failed(7, `check result ${checkId}`, 'missing from the bag', { path: entry.path, expected: entry.digest });
      } else {
        this.named.add(entry.path);
        this.claims.compare(7, `check result ${checkId} sha256`, entry.digest, this.ctx.fileDigest(entry.path), { path: entry.path });
        const [value, problem] = parseKept(this.bag, entry.path, false);
        if (value === undefined) {
          this.claims.failed(7, `check result ${checkId}`, problem || 'unreadable', { path: entry.path });
        } else {
          const sp = this.ctx.schemaProblem('check-result', value, entry.path);
          if (sp) {
            this.claims.failed(7, `check result ${checkId} is schema-valid`, sp, { path: entry.path });
          } else {
            if (value.check_id !== checkId) {
              this.claims.failed(7, `check result ${checkId}`, 'check_id inside differs', { path: entry.path, expected: checkId, observed: value.check_id });
            }
            const req = required.get(checkId);
            if (req !== undefined && value.required !== req) {
              this.claims.failed(7, `check result ${checkId}`, "required differs from the report's check", { path: entry.path, expected: String(req), observed: String(value.required) });
            }
          }
        }
      }
      const cases = entry.cases;
      const expectedExported = Math.min(cases.total, remaining);
      remaining -= expectedExported;
      if (cases.exported !== expectedExported) {
        this.claims.failed(10, `case count of ${checkId}`, 'exported count does not follow the first-20,000 rule', { expected: String(expectedExported), observed: String(cases.exported) });
      }
      const cut = this.listing('cases', checkId);
      if (cases.total > cases.exported && (cut === null || cut.reason !== 'case_limit')) {
        this.claims.failed(10, `case count of ${checkId}`, 'cases were left out without a case_limit entry', { expected: String(cases.total), observed: String(cases.exported) });
      }
      if (cases.path === null) {
        this.listedOrFailed(7, 'cases', checkId, `cases of ${checkId}`);
        continue;
      }
      this.named.add(cases.path);
      if (this.ctx.present(cases.path)) {
        this.claims.compare(7, `cases of ${checkId} sha256`, cases.digest, this.ctx.fileDigest(cases.path), { path: cases.path });
      }
      this.checkCaseLines(checkId, cases, tree);
    }
    if (this.casesUnknown) return;
    const root = tree.root();
    const declared = this.bundle.cases_tree;
    if (tree.size === declared.tree_size && root === declared.root) {
      this.claims.proven(8, 'cases_tree root', { expected: declared.root, observed: root });
    } else {
      this.claims.failed(8, 'cases_tree root', 'the Merkle tree of the exported cases differs', { expected: `${declared.tree_size}:${declared.root}`, observed: `${tree.size}:${root}` });
    }
  }

  /** @param {string} checkId @param {any} cases @param {TreeBuilder} tree */
  checkCaseLines(checkId, cases, tree) {
    const data = this.bag.kept.get(cases.path);
    if (data === undefined) {
      this.casesUnknown = true;
      this.checksUnknown.add(checkId);
      this.claims.failed(8, `cases of ${checkId}`, 'missing from the bag', { path: cases.path, expected: cases.digest });
      return;
    }
    /** @type {Uint8Array[]} */
    const lines = [];
    let start = 0;
    for (let i = data.indexOf(0x0a); i >= 0; i = data.indexOf(0x0a, i + 1)) {
      lines.push(data.subarray(start, i));
      start = i + 1;
    }
    if (start < data.length || data.length === 0) {
      // Python's split keeps a last piece (b"" when the file ends with a newline).
      if (data.length === 0) {
        // empty file: one empty piece, which is the "ends with newline" case of nothing.
      } else {
        lines.push(data.subarray(start));
        this.claims.failed(8, `cases of ${checkId}`, 'case file must end with a newline', { path: cases.path });
      }
    }
    if (data.length === 0) {
      // b"".split(b"\n") == [b""]: popped as the empty last line; no lines.
    }
    const problems = [];
    const parsed = [];
    lines.forEach((raw, i) => {
      const where = `${cases.path}:${i + 1}`;
      tree.append(raw);
      let value;
      try {
        value = loadJson(raw, where, true);
      } catch (e) {
        if (!(e instanceof JsonError)) throw e;
        problems.push(e.message);
        return;
      }
      const sp = this.ctx.schemaProblem('case', value, where);
      if (sp) {
        problems.push(sp);
        return;
      }
      if (value.check_id !== checkId) {
        problems.push(`${where}: check_id ${JSON.stringify(value.check_id)} is not ${JSON.stringify(checkId)}`);
        return;
      }
      parsed.push(value);
    });
    if (lines.length !== cases.exported) problems.push(`${lines.length} lines, bundle.json says ${cases.exported} exported`);
    if (problems.length) {
      this.claims.failed(8, `cases of ${checkId} are canonical and schema-valid`, problems.slice(0, 3).join('; ') + (problems.length > 3 ? ` (+${problems.length - 3} more)` : ''), { path: cases.path });
    } else {
      this.claims.proven(8, `cases of ${checkId}: ${lines.length} lines canonical and schema-valid`, { path: cases.path });
    }
    for (const c of parsed) {
      const ex = c.example;
      this.examplesUsed.set(`${refOf(ex.dataset_id, ex.version)}/${ex.example_id}`, [ex.dataset_id, ex.version, ex.example_id]);
      const refs = (c.output ? [c.output] : []).concat(c.evidence);
      for (const r of refs) {
        if (!this.caseRefs.has(r.digest)) this.caseRefs.set(r.digest, []);
        /** @type {any[]} */ (this.caseRefs.get(r.digest)).push({ kind: r.kind, location: r.location, checkId, size: r.size });
      }
    }
  }

  // -- 8: payloads
  checkPayloads() {
    /** @type {Map<string, any>} */
    const payloads = new Map();
    for (const p of this.bundle.payloads) payloads.set(p.digest, p);
    for (const p of this.bundle.payloads) {
      this.named.add(p.path);
      if (p.path !== `data/blobs/sha256/${p.digest.slice(7)}`) {
        this.claims.failed(8, `payload ${p.digest}`, 'payload path does not follow data/blobs/sha256/<hex>', { path: p.path });
      }
      const info = this.bag.files.get(p.path);
      if (info !== undefined && info.size !== p.size) {
        this.claims.failed(8, `payload ${p.digest} size`, 'size differs from bundle.json', { path: p.path, expected: String(p.size), observed: String(info.size) });
      }
    }
    const manifestRefs = this.manifestRefs();
    for (const p of this.bundle.payloads) {
      if (this.casesUnknown) break;
      if (!this.caseRefs.has(p.digest) && !manifestRefs.has(p.digest)) {
        this.claims.failed(10, `payload ${p.digest}`, 'in the bundle, but no exported case or evidence manifest refers to it', { path: p.path });
      }
    }
    for (const digest of sortedBy(this.caseRefs.keys())) {
      const entry = payloads.get(digest);
      const listed = this.listedPayload(digest);
      if (entry !== undefined) {
        this.claims.compare(8, `payload ${digest}`, digest, this.ctx.fileDigest(entry.path), { path: entry.path });
      } else if (listed) {
        this.claims.unprovable(8, `payload ${digest}`, listed.reason, { expected: digest, detail: listed.detail });
      } else {
        this.claims.failed(8, `payload ${digest}`, 'referenced by a case but neither in the bundle nor listed', { expected: digest });
      }
    }
  }

  manifestRefs() {
    const out = new Set();
    for (const c of this.report ? this.report.checks : []) {
      for (const r of c.evidence_refs) if (r.kind === 'manifest') out.add(r.digest);
    }
    return out;
  }

  // -- 9: evidence refs
  checkEvidenceRefs() {
    if (!this.report) return;
    /** @type {Map<string, any>} */
    const payloads = new Map();
    for (const p of this.bundle.payloads) payloads.set(p.digest, p);
    // Each check's case outputs and evidence, in one pass over the references (a scan of
    // them all per check would cost checks x references).
    /** @type {Map<string, Set<string>>} */
    const scoredByCheck = new Map();
    for (const [d, uses] of this.caseRefs) {
      for (const u of uses) {
        let set = scoredByCheck.get(u.checkId);
        if (set === undefined) scoredByCheck.set(u.checkId, (set = new Set()));
        set.add(`${u.kind}\u0000${d}`);
      }
    }
    for (const check of this.report.checks) {
      const checkId = check.check_id;
      const scored = scoredByCheck.get(checkId) ?? new Set();
      const cut = this.listing('cases', checkId);
      if (this.checksUnknown.has(checkId)) continue;
      for (const ref of check.evidence_refs) {
        const subject = `evidence ${ref.kind} ${ref.digest} of ${checkId}`;
        if (ref.kind !== 'manifest') {
          if (scored.has(`${ref.kind}\u0000${ref.digest}`)) this.claims.proven(9, subject);
          else if (cut) this.claims.unprovable(9, subject, cut.reason, { detail: 'may belong to cases not exported' });
          else this.claims.failed(9, subject, "not among the outputs and evidence of the check's cases", { expected: ref.digest });
          continue;
        }
        const entry = payloads.get(ref.digest);
        if (entry === undefined) {
          const listed = this.listing('evidence_manifest', ref.digest);
          if (listed) this.claims.unprovable(9, subject, listed.reason, { expected: ref.digest, detail: listed.detail });
          else this.claims.failed(9, subject, 'evidence manifest neither in the bundle nor listed', { expected: ref.digest });
          continue;
        }
        this.checkEvidenceManifest(subject, checkId, entry, scored, cut);
      }
    }
  }

  /** @param {string} subject @param {string} checkId @param {any} entry @param {Set<string>} scored @param {any} cut */
  checkEvidenceManifest(subject, checkId, entry, scored, cut) {
    const [value, problem] = parseKept(this.bag, entry.path, true);
    if (value === undefined) {
      this.claims.failed(9, subject, `evidence manifest unreadable: ${problem}`, { path: entry.path });
      return;
    }
    if (this.ctx.fileDigest(entry.path) !== entry.digest) {
      this.claims.failed(9, subject, 'evidence manifest JSON digest differs', { path: entry.path, expected: entry.digest });
      return;
    }
    const sp = this.ctx.schemaProblem('evidence-manifest', value, entry.path);
    if (sp) {
      this.claims.failed(9, subject, sp, { path: entry.path });
      return;
    }
    const keys = value.evidence.map((/** @type {any} */ e) => `${e.digest}\u0000${e.kind}`);
    const sorted = sortedBy(new Set(keys));
    if (keys.length !== sorted.length || keys.some((/** @type {string} */ k, /** @type {number} */ i) => k !== sorted[i])) {
      this.claims.failed(11, subject, 'evidence manifest entries must be unique and sorted by (digest, kind)', { path: entry.path });
    }
    if (keys.length <= MAX_EVIDENCE_REFS) {
      this.claims.failed(11, subject, `an evidence manifest stands for more than ${MAX_EVIDENCE_REFS} items; this one has ${keys.length}`, { path: entry.path });
    }
    if (value.check_id !== checkId) {
      this.claims.failed(9, subject, 'evidence manifest names another check', { path: entry.path, expected: checkId, observed: value.check_id });
      return;
    }
    const missing = value.evidence.filter((/** @type {any} */ e) => !scored.has(`${e.kind}\u0000${e.digest}`));
    if (!missing.length) this.claims.proven(9, `${subject}: ${value.evidence.length} entries match the cases`, { path: entry.path });
    else if (cut) this.claims.unprovable(9, subject, cut.reason, { path: entry.path, detail: `${missing.length} entries may belong to cases not exported` });
    else this.claims.failed(9, subject, `${missing.length} manifest entries are not among the check's cases`, { path: entry.path, expected: missing[0].digest });
  }

  // -- 10: accounting
  /** @param {Map<string, Map<string, string>>} manifests */
  checkAccounting(manifests) {
    /** @type {Map<string, {kinds: string[], locations: Set<string>}>} */
    const uses = new Map();
    for (const [d, refs] of this.caseRefs) {
      const u = { kinds: /** @type {string[]} */ ([]), locations: new Set() };
      for (const r of refs) {
        u.kinds.push(r.kind);
        u.locations.add(r.location);
      }
      uses.set(d, u);
    }
    let ok = true;
    const problems = listingProblems({
      bundle: this.bundle,
      report: this.report,
      readBody: this.readBody,
      files: this.bag.files,
      payloadUses: uses,
      examplesUsed: this.examplesUsed,
      manifests,
      importedRun: this.importedRun(),
    });
    for (const [e, problem] of problems) {
      this.claims.failed(10, `listed ${e.kind} ${e.ref} (${e.reason})`, problem, { expected: e.digest });
      ok = false;
    }
    const dataFiles = [...this.bag.files.keys()].filter((p) => p.startsWith('data/'));
    for (const path of sortedBy(dataFiles.filter((p) => !this.named.has(p)))) {
      this.claims.failed(10, 'every file is named by bundle.json', 'file under data/ that bundle.json does not name', { path, observed: 'sha256:' + /** @type {any} */ (this.bag.files.get(path)).sha256 });
      ok = false;
    }
    for (const path of sortedBy([...this.named].filter((p) => !this.bag.files.has(p)))) {
      this.claims.failed(10, 'every named file is present', 'bundle.json names a file the bag lacks', { path });
      ok = false;
    }
    if (ok) this.claims.proven(10, `accounting: ${this.listedCount} listed items agree with the bundle; every file is named`);
  }

  /** Whether the report is an imported run (SPEC 16), whose run files are artifacts kept whatever their size. */
  importedRun() {
    return this.report !== null && IMPORT_PRODUCERS.has(this.report.producer);
  }

  // -- 11: coherence
  contractPaths() {
    const b = this.bundle;
    /** @type {[string, string|null, string][]} */
    const out = [
      ['report body', b.report.path, 'data/report/body.json'],
      ['envelope', b.report.envelope.path, 'data/report/envelope.json'],
    ];
    const s = b.suite;
    out.push(['suite', s.path, `data/suite/${s.suite_id}/${s.version}.json`]);
    for (const sc of b.scorers) out.push(['scorer', sc.path, `data/scorers/${sc.scorer_id}/${sc.version}`]);
    for (const d of b.datasets) {
      const base = `data/datasets/${d.dataset_id}/${d.version}`;
      out.push(['dataset manifest', d.path, `${base}/manifest.json`]);
      for (const e of d.examples) out.push(['example', e.path, `${base}/examples/${e.example_id}.json`]);
    }
    for (const c of b.checks) {
      out.push(['check result', c.path, `data/checks/${c.check_id}.json`]);
      out.push(['case file', c.cases.path, `data/cases/${c.check_id}.jsonl`]);
    }
    return out;
  }

  checkCoherence() {
    const before = this.claims.items.length;
    for (const [what, given, defined] of this.contractPaths()) {
      if (given !== null && given !== defined) {
        this.claims.failed(11, `${what} at the path the contract defines`, 'bundle.json puts it elsewhere', { path: given, expected: defined, observed: given });
      }
    }
    if (!this.bundle.exporter.permissions.includes(EXPORT)) {
      this.claims.failed(11, 'recorded permissions', "the exporter's recorded permissions lack report.export: no export could have written this bundle", { path: 'data/bundle.json' });
    }
    /** @type {[string, string[]][]} */
    const lists = [
      ['the report body', this.report ? this.report.checks.map((/** @type {any} */ c) => c.check_id) : []],
      ['bundle.json', this.bundle.checks.map((/** @type {any} */ c) => c.check_id)],
    ];
    for (const [where, ids] of lists) {
      /** @type {Map<string, number>} */
      const counts = new Map();
      for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
      for (const id of sortedBy(counts.keys())) {
        const n = /** @type {number} */ (counts.get(id));
        if (n > 1) this.claims.failed(11, `check ${id} appears once`, `${where} lists check ${id} ${n} times`);
      }
    }
    /** @type {Map<string, number>} */
    const sizes = new Map();
    for (const p of this.bundle.payloads) sizes.set(p.digest, p.size);
    const imported = this.importedRun();
    for (const digest of sortedBy(this.caseRefs.keys())) {
      const problems = new Set();
      const uses = /** @type {any[]} */ (this.caseRefs.get(digest));
      for (const u of uses) {
        const actual = sizes.get(digest);
        if (actual !== undefined && u.size !== actual) problems.add(`a case of ${u.checkId} gives its ${u.kind} size ${u.size}, the payload has ${actual} bytes`);
        if (u.location === 'inline' && u.size > INLINE_MAX) problems.add(`a case of ${u.checkId} stores ${u.size} bytes inline, over the ${INLINE_MAX}-byte limit`);
        if (u.location === 'sso' && u.size <= INLINE_MAX) problems.add(`a case of ${u.checkId} puts ${u.size} bytes at SSO, which holds only payloads over ${INLINE_MAX} bytes`);
      }
      if (sizes.has(digest)) {
        // SPEC 16: an imported run's files are artifacts exported whatever their size.
        const runFile = imported && uses.every((u) => u.kind === 'artifact');
        if (!uses.some((u) => u.location === 'inline') && !runFile) problems.add('in the bundle, yet no case stores it inline');
        if (uses.some((u) => u.kind === 'trace' || u.location === 'traces')) problems.add('in the bundle, yet a case refers to it as a trace');
      }
      for (const p of sortedBy(problems)) this.claims.failed(11, `payload ${digest} agrees with its case references`, p);
    }
    if (this.claims.items.length === before) this.claims.proven(11, 'coherence: permissions, checks once each, payload references agree');
  }
}

/** Dataset keys "id@version" sorted as (id, version) tuples. @param {Iterable<string>} keys */
function sortedDatasetKeys(keys) {
  return [...keys].sort((a, b) => {
    const [ia, va] = splitRef(a);
    const [ib, vb] = splitRef(b);
    return byteOrder(ia, ib) || va - vb;
  });
}

/** @param {string} r @returns {[string, number]} */
function splitRef(r) {
  const at = r.lastIndexOf('@');
  return [r.slice(0, at), Number(r.slice(at + 1))];
}

/** @param {[string, number, string]} a @param {[string, number, string]} b */
function cmpTriple(a, b) {
  return byteOrder(a[0], b[0]) || a[1] - b[1] || byteOrder(a[2], b[2]);
}

/**
 * A superseded envelope that names its own report as the successor, or a supersession
 * before the report's issued_at (SPEC 3.2; bundler/core/envelope.py): the message, or null.
 * @param {any} report the report body
 * @param {any} envelope the envelope, schema-valid
 * @param {string} path where the envelope is
 * @returns {string | null}
 */
export function supersessionProblem(report, envelope, path) {
  if (envelope.status !== 'superseded') return null;
  if (envelope.superseded_by === report.report_id) {
    return `${path}: /superseded_by: names the report itself, not the report that supersedes it`;
  }
  const at = instant(envelope.superseded_at);
  const issued = instant(report.issued_at);
  if (at !== null && issued !== null && (at[0] < issued[0] || (at[0] === issued[0] && at[1] < issued[1]))) {
    return `${path}: /superseded_at: says ${envelope.superseded_at}, earlier than the report's issued_at ${report.issued_at}`;
  }
  return null;
}

/**
 * An RFC 3339 UTC timestamp as [whole seconds, fraction padded to 9 digits], or null.
 * @param {unknown} text
 * @returns {[string, string] | null}
 */
function instant(text) {
  if (typeof text !== 'string' || !text.endsWith('Z')) return null;
  const body = text.slice(0, -1);
  const dot = body.indexOf('.');
  const whole = dot < 0 ? body : body.slice(0, dot);
  const fraction = dot < 0 ? '' : body.slice(dot + 1);
  return [whole, fraction.padEnd(9, '0')];
}
