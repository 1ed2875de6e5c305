// @ts-check
/**
 * Claim 10's listing rules (SPEC 4.3 and 5), in one table: a bundle may call an item
 * unavailable or redacted only as an exporter following the contract would have. An
 * entry must name an item the report, a manifest or an exported case refers to, by its
 * one canonical ref; not be in the bundle; be listed once (a payload is one item per
 * digest); carry a reason its kind allows, whose situation holds; and carry the pinned
 * digest (a *_mismatch entry: an observed digest that differs from it).
 */
import { isDigest } from './util.mjs';

const PAYLOAD_KINDS = new Set(['output', 'trace', 'artifact']);
const MISMATCH = new Set(['digest_mismatch', 'scorer_digest_mismatch']);

/** (group, kind) -> the reasons an item of that kind can be listed for. */
export const REASONS = /** @type {Record<string, string[]>} */ ({
  'unavailable suite': ['missing_from_store', 'digest_mismatch'],
  'unavailable scorer': ['scorer_version_missing', 'scorer_digest_mismatch', 'missing_from_store'],
  'unavailable dataset': ['missing_from_store', 'digest_mismatch'],
  'unavailable example': ['removed_by_retention', 'missing_from_store', 'digest_mismatch'],
  'redacted example': ['no_dataset_read_body'],
  'unavailable check': ['missing_from_store'],
  'unavailable cases': ['case_limit', 'missing_from_store'],
  'unavailable output': ['payload_at_sso', 'missing_from_store', 'digest_mismatch'],
  'unavailable artifact': ['payload_at_sso', 'missing_from_store', 'digest_mismatch'],
  'redacted output': ['no_dataset_read_body'],
  'redacted artifact': ['no_dataset_read_body'],
  'redacted trace': ['trace_capture_policy'],
  'unavailable evidence_manifest': ['missing_from_store', 'digest_mismatch'],
});

/** The one canonical spelling of a versioned item's ref. @param {string} id @param {number} version */
export function refOf(id, version) {
  return `${id}@${version}`;
}

/**
 * @typedef {{bundle: any, report: any, readBody: boolean, files: Map<string, any>,
 *   payloadUses: Map<string, {kinds: string[], locations: Set<string>}>,
 *   examplesUsed: Map<string, [string, number, string]>, manifests: Map<string, Map<string, string>>,
 *   importedRun: boolean}} Facts
 */

/**
 * Each listed entry that contradicts the bundle, with the rule it breaks.
 * @param {Facts} f
 * @returns {[any, string][]}
 */
export function listingProblems(f) {
  const c = new Check(f);
  /** @type {[any, string][]} */
  const out = [];
  /** kind -> the refs listed so far (payload kinds share one set: one item per digest). */
  /** @type {Map<string, Set<string>>} */
  const seen = new Map();
  /** @type {Set<string>} */
  const seenPayloads = new Set();
  for (const group of ['unavailable', 'redacted']) {
    for (const raw of f.bundle[group]) {
      // The entry as read (a redacted one has no detail): no copy of 150,000 of them.
      const e = raw;
      const payload = PAYLOAD_KINDS.has(e.kind) || e.kind === 'evidence_manifest';
      const refs = payload ? seenPayloads : seen.get(e.kind) ?? seen.set(e.kind, new Set()).get(e.kind);
      if (refs.has(e.ref)) {
        out.push([e, 'the item is listed more than once']);
        continue;
      }
      refs.add(e.ref);
      const p = c.problem(e, group);
      if (p !== null) out.push([e, p]);
    }
  }
  return out;
}

class Check {
  /** @param {Facts} f */
  constructor(f) {
    this.f = f;
    const report = f.report || {};
    const checks = report.checks || [];
    /** @type {Map<string, string[]>} */
    this.scorerPins = new Map();
    for (const c of checks) {
      const r = refOf(c.scorer_ref.id, c.scorer_ref.version);
      if (!this.scorerPins.has(r)) this.scorerPins.set(r, []);
      /** @type {string[]} */ (this.scorerPins.get(r)).push(c.scorer_ref.digest);
    }
    /** @type {Map<string, string>} */
    this.datasetPins = new Map((report.dataset_refs || []).map((/** @type {any} */ r) => [refOf(r.id, r.version), r.digest]));
    /** @type {Map<string, string>} */
    this.suitePin = new Map(report.suite_ref ? [[refOf(report.suite_ref.id, report.suite_ref.version), report.suite_ref.digest]] : []);
    /** @type {Map<string, string>} */
    this.manifestChecks = new Map();
    for (const c of checks) for (const r of c.evidence_refs) if (r.kind === 'manifest') this.manifestChecks.set(r.digest, c.check_id);
    /** @type {Map<string, any>} */
    this.bundleChecks = new Map();
    for (const c of f.bundle.checks) this.bundleChecks.set(c.check_id, c);
    this.payloads = new Set(f.bundle.payloads.map((/** @type {any} */ p) => p.digest));
  }

  /** @param {any} e @param {string} group @returns {string|null} */
  problem(e, group) {
    if (!this.f.report) return 'the report body did not verify, so no listing can be held against it';
    const allowed = REASONS[`${group} ${e.kind}`];
    if (allowed === undefined || !allowed.length) return `an item of kind ${e.kind} cannot be ${group}`;
    if (!allowed.includes(e.reason)) {
      return `${e.reason} does not apply to an item of kind ${e.kind} (the contract allows: ${[...allowed].sort().join(', ')})`;
    }
    /** @type {string|null} */
    let p = this.byKind(e, group);
    if (p === null && MISMATCH.has(e.reason)) {
      if (!isDigest(e.detail)) p = `${e.reason} must record the observed digest in detail`;
      else if (e.detail === e.digest) p = `${e.reason}, yet the observed digest is the pinned one`;
    }
    return p;
  }

  /** @param {any} e @param {string} group @returns {string|null} */
  byKind(e, group) {
    switch (e.kind) {
      case 'suite': {
        const p = this.pinned(e, this.suitePin, "the report's suite");
        if (p) return p;
        return this.f.bundle.suite.path !== null ? 'listed, yet the suite is in the bundle' : null;
      }
      case 'dataset': {
        const p = this.pinned(e, this.datasetPins, "among the report's dataset_refs");
        if (p) return p;
        return this.f.bundle.datasets.some((/** @type {any} */ d) => refOf(d.dataset_id, d.version) === e.ref) ? 'listed, yet the dataset manifest is in the bundle' : null;
      }
      case 'scorer': {
        const pins = this.scorerPins.get(e.ref);
        if (!pins) return 'no report check pins this scorer version (refs are written {id}@{version})';
        if (e.digest !== pins[0]) return 'the listed digest is not the one the report pins';
        if (this.f.bundle.scorers.some((/** @type {any} */ s) => refOf(s.scorer_id, s.version) === e.ref)) return 'listed, yet the scorer is in the bundle';
        if (e.reason === 'scorer_digest_mismatch' && pins.includes(e.detail)) return 'scorer_digest_mismatch, yet the observed digest is a pinned one';
        return null;
      }
      case 'example':
        return this.example(e);
      case 'check': {
        const entry = this.bundleChecks.get(e.ref);
        if (!entry) return 'not a check of the report';
        if (e.digest !== null) return 'a check result has no pinned digest: the listed digest must be null';
        return entry.path !== null ? 'listed, yet the check result is in the bundle' : null;
      }
      case 'cases': {
        const entry = this.bundleChecks.get(e.ref);
        if (!entry) return 'not a check of the report';
        if (e.digest !== null) return 'a case file has no pinned digest: the listed digest must be null';
        const cases = entry.cases;
        if (e.reason === 'case_limit') {
          const cut = cases.total - cases.exported;
          if (cut <= 0) return 'case_limit, yet every case of the check was exported';
          if (e.detail !== String(cut)) return `case_limit detail must be the number of cases left out (${cut})`;
          return null;
        }
        return cases.path !== null ? 'listed, yet the case file is in the bundle' : null;
      }
      case 'evidence_manifest': {
        const p = this.payload(e);
        if (p) return p;
        return this.manifestChecks.has(e.ref) ? null : 'no report check refers to this evidence manifest';
      }
      case 'trace': {
        const [use, p] = this.casePayload(e);
        if (!use) return p;
        if (!use.kinds.includes('trace') && !use.locations.has('traces')) return 'no case refers to it as a trace or stores it in traces';
        return null;
      }
      case 'output':
      case 'artifact':
        return this.body(e);
      default:
        return `an item of kind ${e.kind} cannot be ${group}`;
    }
  }

  /** @param {any} e @param {Map<string, string>} pins @param {string} what */
  pinned(e, pins, what) {
    if (!pins.has(e.ref)) return `not ${what} (refs are written {id}@{version}, ASCII digits)`;
    if (e.digest !== pins.get(e.ref)) return 'the listed digest is not the one the report pins';
    return null;
  }

  /** @param {any} e */
  example(e) {
    const used = this.f.examplesUsed.get(e.ref);
    if (!used) return 'no exported case uses this example (refs are written {dataset}@{version}/{example_id}, ASCII digits)';
    const [ds, version, exampleId] = used;
    const datasets = this.f.bundle.datasets.filter((/** @type {any} */ d) => d.dataset_id === ds && d.version === version);
    let entry = null;
    for (const d of datasets) {
      for (const x of d.examples) {
        if (x.example_id === exampleId) {
          entry = x;
          break;
        }
      }
      if (entry) break;
    }
    if (entry && entry.path !== null) return 'listed, yet the example body is in the bundle';
    const manifest = this.f.manifests.get(refOf(ds, version));
    if (!datasets.length || (manifest !== undefined && !manifest.has(exampleId))) {
      if (e.reason !== 'missing_from_store' || e.digest !== null) return 'an example without a manifest entry is missing_from_store with no digest';
      return null;
    }
    if (manifest === undefined) return null;
    if (e.digest !== manifest.get(exampleId)) return 'the listed digest is not the one the dataset manifest pins';
    if (e.reason === 'no_dataset_read_body') {
      if (this.f.readBody) return "the exporter's recorded permissions include dataset.read_body";
    } else if (!this.f.readBody) {
      return 'without dataset.read_body an example body is redacted, not unavailable';
    }
    return null;
  }

  /** @param {any} e */
  payload(e) {
    if (e.ref !== e.digest || !isDigest(e.ref)) return 'a payload is listed by its digest, as ref and digest alike';
    if (this.payloads.has(e.ref) || this.f.files.has(`data/blobs/sha256/${e.ref.slice(7)}`)) return 'listed, yet the payload is in the bundle';
    return null;
  }

  /** @param {any} e @returns {[{kinds: string[], locations: Set<string>}|null, string|null]} */
  casePayload(e) {
    const p = this.payload(e);
    if (p) return [null, p];
    if (this.manifestChecks.has(e.ref)) return [null, 'an evidence manifest is always exported; list it as evidence_manifest'];
    const use = this.f.payloadUses.get(e.ref);
    if (!use) return [null, 'no exported case refers to this payload'];
    return [use, null];
  }

  /** @param {any} e */
  body(e) {
    const [use, p] = this.casePayload(e);
    if (!use) return p;
    if (use.kinds.includes('trace') || use.locations.has('traces')) return 'a payload a case stores as a trace is redacted as kind trace';
    if (e.reason === 'no_dataset_read_body') {
      if (this.f.readBody) return "the exporter's recorded permissions include dataset.read_body";
      // SPEC 16: an imported run's files (artifacts) are redacted whenever example bodies are.
      if (e.kind === 'artifact') {
        if (!this.f.importedRun) return 'only case outputs, and the run files of an imported run, are redacted for dataset.read_body';
        // The exporter redacts a payload any case calls an output as an output.
        return use.kinds.includes('output') ? 'redacted as artifact, but its cases make it an output' : null;
      }
      if (!use.kinds.includes('output')) return 'only case outputs are redacted for dataset.read_body';
      return null;
    }
    if (use.kinds.includes('output') && !this.f.readBody) return 'without dataset.read_body a case output is redacted, not unavailable';
    if (this.f.importedRun && use.kinds.includes('artifact') && !this.f.readBody) return 'without dataset.read_body an imported run file is redacted, not unavailable';
    if (e.kind !== use.kinds[0]) return `listed as ${e.kind}, but its first use in the cases is as ${use.kinds[0]}`;
    if (e.reason === 'payload_at_sso') {
      if (use.locations.has('inline')) return 'a case payload stored inline cannot be payload_at_sso';
      if (this.f.importedRun && e.kind === 'artifact') return "an imported run's files are exported whatever their size (SPEC 16), never payload_at_sso";
      return null;
    }
    if (!use.locations.has('inline')) {
      if (this.f.importedRun && e.kind === 'artifact') return null;
      return 'only inline payloads are taken from the store\'s blobs';
    }
    return null;
  }
}
