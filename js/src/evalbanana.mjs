// @ts-check
/**
 * eval-banana bundles (SPEC 10.2), beyond claims 1, 2 and 10: report.json bound by its
 * digest and consistent with itself (counts, points, percentage, meets_threshold and
 * run_passed from the statuses and pass_threshold); each checks/<stem>.json equal to
 * its report entry under the stem rule, its score following its status; each bounded
 * stdout tail what the rule makes of the full file, stderr equal to its file; each
 * check_definition_sha256 recomputed from the bundled YAML and the script at the path
 * its own YAML names, or the definition listed; the case tree over the check files in
 * report order; every file named with its digest and size.
 */
import { checkBagFrame } from './bagit.mjs';
import { framedDigest, EB_DEFINITION_TAG } from './framed.mjs';
import { TreeBuilder } from './merkle.mjs';
import { ENC, UTF8, parseKept, byteOrder, isDigest, loadJson } from './util.mjs';
import { JsonError } from './errors.mjs';

const RUN = 'data/run/';
const DEFS = 'data/definitions/';
const REPORT = 'data/run/report.json';
const TAIL = 2000;
const STATUSES = new Set(['passed', 'failed', 'error']);

/** @param {import('./verifyctx.mjs').Ctx} ctx @param {string} id */
export function checkStem(ctx, id) {
  const label = id.replace(/[^a-zA-Z0-9._-]+/g, '_').replace(/^[._]+|[._]+$/g, '');
  const cut = [...label].slice(0, 40).join('') || 'check';
  return `${cut}-${ctx.rawSha256(ENC.encode(id))}`;
}

/** @param {string} stem */
function banner(stem) {
  return `[eval-banana: stdout truncated to the last ${TAIL} characters; full output at checks/${stem}.stdout.txt]\n`;
}

// Bytes of a stdout file validated at a time: only this much of its text exists at once.
const VALIDATE_CHUNK = 1024 * 1024;

/**
 * The bounded tail (SPEC 10) of the text of a stdout file's bytes, or null when they are not UTF-8,
 * without ever holding the whole text (a 32 MiB stdout would be 32 million characters,
 * and an array of them many times that): the bytes are validated a chunk at a time,
 * and only the last 2,000 code points are decoded, found by their lead bytes (in valid
 * UTF-8 each code point starts with exactly one byte outside 0x80..0xBF).
 * @param {Uint8Array} data @param {string} stem
 * @returns {string|null}
 */
export function boundedTailOf(data, stem) {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  try {
    for (let at = 0; at < data.length; at += VALIDATE_CHUNK) decoder.decode(data.subarray(at, at + VALIDATE_CHUNK), { stream: true });
    decoder.decode();
  } catch {
    return null;
  }
  let count = 0;
  let start = 0;
  for (let i = data.length - 1; i >= 0; i--) {
    if ((data[i] & 0xc0) === 0x80) continue;
    count++;
    if (count === TAIL) start = i;
    else if (count > TAIL) return banner(stem) + UTF8.decode(data.subarray(start));
  }
  return UTF8.decode(data);
}

/**
 * Equality of two values of the strict reader as JCS sees it (equal canonical forms),
 * without writing either: numbers by value (the reader gives 1 and 1.0 the same double,
 * and JCS writes -0 as 0), strings exactly, true never 1, objects key by key whatever
 * their order. Iterative: the reader bounds nesting, not the length of a list.
 * @param {unknown} a @param {unknown} b
 */
export function sameJson(a, b) {
  // Only pairs of containers wait on the stack; scalars are compared where they are
  // met, so a list of a million strings costs no allocation.
  /** @type {[any, any][]} */
  const pending = [];
  /** @param {unknown} x @param {unknown} y */
  const meet = (x, y) => {
    if (x === y) return true;
    if (x === null || y === null || typeof x !== 'object' || typeof y !== 'object') return false;
    pending.push([x, y]);
    return true;
  };
  if (!meet(a, b)) return false;
  while (pending.length) {
    const [x, y] = /** @type {[any, any]} */ (pending.pop());
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    if (Array.isArray(x)) {
      if (x.length !== y.length) return false;
      for (let i = 0; i < x.length; i++) if (!meet(x[i], y[i])) return false;
      continue;
    }
    const keys = Object.keys(x);
    if (keys.length !== Object.keys(y).length) return false;
    for (const k of keys) if (!Object.prototype.hasOwnProperty.call(y, k) || !meet(x[k], y[k])) return false;
  }
  return true;
}

/** Python's round(x, 1) on a binary double (round half to even on the exact value). @param {number} x */
function round1(x) {
  const scaled = x * 10;
  const r = Math.round(scaled);
  // Math.round rounds .5 up; Python rounds the exact binary value half to even.
  if (Math.abs(scaled - Math.trunc(scaled)) === 0.5) {
    const even = Math.trunc(scaled) % 2 === 0 ? Math.trunc(scaled) : r;
    return even / 10;
  }
  return r / 10;
}

/** `project_root`-relative path of `source_path`, or null outside it. @param {string} root @param {string} src */
function mapSourcePath(root, src) {
  if (typeof root !== 'string' || typeof src !== 'string') return null;
  if (!root.startsWith('/') || !src.startsWith('/') || root.startsWith('//') || src.startsWith('//')) return null;
  const r = root.split('/').filter((p) => p && p !== '.');
  const s = src.split('/').filter((p) => p && p !== '.');
  if (r.includes('..') || s.includes('..') || s.length <= r.length || r.some((p, i) => s[i] !== p)) return null;
  return s.slice(r.length).join('/');
}

/** posixpath.normpath of a relative join. @param {string} dir @param {string} rel */
function joinNormal(dir, rel) {
  if (rel.startsWith('/')) return null;
  const parts = [];
  for (const p of (dir ? `${dir}/${rel}` : rel).split('/')) {
    if (!p || p === '.') continue;
    if (p === '..') {
      if (!parts.length) return null;
      parts.pop();
    } else parts.push(p);
  }
  return parts.length ? parts.join('/') : null;
}

/**
 * The keys a definition's digest depends on: type, script (empty or not) and
 * script_path, from the top-level mapping of the YAML; a YAML outside the small subset
 * read here gives null (the claim then fails rather than guess).
 * @param {Uint8Array} bytes
 */
export function definitionKeys(bytes) {
  let text;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return null;
  }
  text = text.replace(/^\ufeff/, '');
  /** @type {Record<string, string|null>} */
  const found = {};
  let scriptNonEmpty = false;
  const lines = text.split(/\r\n|\n|\r/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (!line.trim() || line.trim().startsWith('#') || (i === 0 && /^---\s*(#.*)?$/.test(line))) continue;
    if (/^[ \t]/.test(line) || line.startsWith('-')) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?$/.exec(line);
    if (!m) return null;
    const key = m[1];
    if (!['type', 'script', 'script_path'].includes(key)) continue;
    if (key in found) return null;
    let rest = (m[2] ?? '').replace(/[ \t]+#.*$/, '').trim();
    if (key === 'script' && /^[|>]/.test(rest)) {
      let j = i + 1;
      while (j < lines.length && (lines[j].trim() === '' || /^[ \t]/.test(lines[j]))) {
        if (lines[j].trim()) scriptNonEmpty = true;
        j++;
      }
      found[key] = scriptNonEmpty ? 'x' : '';
      continue;
    }
    if (rest === '' || rest === '~' || rest === 'null' || rest === 'Null' || rest === 'NULL') found[key] = null;
    else if (/^'.*'$/.test(rest)) found[key] = rest.slice(1, -1).replace(/''/g, "'");
    else if (/^"[^"\\]*"$/.test(rest)) found[key] = rest.slice(1, -1);
    else if (/^["'[{&*!|>%@`]/.test(rest)) return null;
    else found[key] = rest;
  }
  return { type: found.type ?? null, script: 'script' in found ? found.script : undefined, scriptPath: found.script_path ?? null };
}

/** @param {import('./verifyctx.mjs').Ctx} ctx */
export function verifyEvalBanana(ctx) {
  const { claims, bag, bundle, options } = ctx;
  const digest = checkBagFrame(ctx, `eval-banana-bundle-${bundle.run.run_id}`);
  const observed = ctx.fileDigest(REPORT);
  claims.compare(3, 'report.json sha256', bundle.run.digest, observed, { path: REPORT });
  if (options.expectReportDigest != null) {
    claims.compare(3, 'report digest equals --expect-report-digest', options.expectReportDigest, observed, { path: REPORT, detail: 'the report is not the one expected' });
  }
  for (const p of [...bag.files.keys()].filter((p) => p.startsWith(RUN) && !bag.kept.has(p)).sort(byteOrder)) {
    claims.failed(3, 'run file can be re-checked', 'over the document size cap; not re-checked', { path: p });
  }
  const [report, problem] = parseKept(bag, REPORT, false);
  const shapeProblem = report === undefined ? problem : reportProblem(report);
  /** @type {any} */
  let summary = { mode: 'bundle', labels: [['Run ID', bundle.run.run_id]] };
  let result = null;
  let issued = null;
  if (shapeProblem !== null) {
    claims.failed(3, 'report.json is a valid eval-banana report', shapeProblem ?? 'unreadable', { path: REPORT });
  } else {
    claims.proven(3, 'report.json is a valid eval-banana report', { path: REPORT });
    for (const name of ['run_id', 'project_root', 'run_passed']) {
      if (bundle.run[name] === report[name]) claims.proven(3, `bundle.json run.${name} agrees with report.json`, { path: REPORT });
      else claims.failed(3, `bundle.json run.${name} agrees with report.json`, 'bundle.json differs from report.json', { path: 'data/bundle.json', expected: String(report[name]), observed: String(bundle.run[name]) });
    }
    const totals = checkRun(ctx, report);
    checkEntries(ctx, report);
    checkDefinitions(ctx, report);
    checkTree(ctx, report);
    const score = `${totals.points_earned}/${totals.total_points}`;
    // The summary the Python verifier writes, field for field, so `render` reads a record
    // of either (SPEC 15): each check's status and score as recorded, the totals recomputed.
    summary = {
      mode: 'bundle',
      labels: [['Run ID', report.run_id], ['Score', score], ['Percentage', `${totals.percentage.toFixed(1)}%`], ['Passed', totals.run_passed ? 'yes' : 'no']],
      run_id: report.run_id,
      pass_threshold: report.pass_threshold,
      checks: report.checks.map((/** @type {any} */ c) => ({ check_id: c.check_id, status: c.status, score: c.score })),
      recomputed: totals,
      cases_tree: bundle.cases_tree ?? null,
    };
    result = totals.run_passed ? 'pass' : 'fail';
    issued = typeof report.completed_at === 'string' ? report.completed_at : null;
  }
  checkFiles(ctx);
  checkListing(ctx, shapeProblem === null ? report : null);
  return { bundleDigest: digest, reportId: bundle.run.run_id, reportDigest: bundle.run.digest, reportResult: result, reportIssuedAt: issued, envelope: null, summary };
}

/** @param {any} r */
function reportProblem(r) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) return 'report.json: not an object';
  const fields = /** @type {[string, string][]} */ ([
    ['run_id', 'string'], ['project_root', 'string'], ['completed_at', 'string'], ['total_checks', 'number'], ['passed_checks', 'number'],
    ['failed_checks', 'number'], ['errored_checks', 'number'], ['points_earned', 'number'], ['total_points', 'number'],
    ['percentage', 'number'], ['pass_threshold', 'number'], ['meets_threshold', 'boolean'], ['run_passed', 'boolean'],
  ]);
  for (const [k, t] of fields) if (typeof r[k] !== t) return `report.json: ${k} must be a ${t}`;
  if (r.schema_version !== 1) return 'report.json: schema_version must be 1';
  if (!Array.isArray(r.checks)) return 'report.json: checks must be a list';
  if (r.checks.length > 20000) return 'report.json: more than 20,000 checks';
  const ids = new Set();
  for (const [i, c] of r.checks.entries()) {
    if (c === null || typeof c !== 'object' || Array.isArray(c)) return `report.json: checks[${i}] is not an object`;
    for (const k of ['check_id', 'check_type', 'check_definition_sha256', 'source_path', 'status', 'stdout', 'stderr']) {
      if (typeof c[k] !== 'string') return `report.json: checks[${i}].${k} must be a string`;
    }
    if (!STATUSES.has(c.status)) return `report.json: checks[${i}].status ${JSON.stringify(c.status)} is not passed, failed or error`;
    if (!['deterministic', 'harness_judge'].includes(c.check_type)) return `report.json: checks[${i}].check_type is not known`;
    if (!isDigest(c.check_definition_sha256)) return `report.json: checks[${i}].check_definition_sha256 is not a digest`;
    if (ids.has(c.check_id)) return `report.json: check ${JSON.stringify(c.check_id)} appears twice`;
    ids.add(c.check_id);
  }
  return null;
}

/** Claims 3 (totals), 7 (check files, scores) and 8 (stdout, stderr). @param {import('./verifyctx.mjs').Ctx} ctx @param {any} report */
function checkRun(ctx, report) {
  const { claims, bag } = ctx;
  const statuses = report.checks.map((/** @type {any} */ c) => c.status);
  const total = statuses.length;
  const passed = statuses.filter((/** @type {string} */ s) => s === 'passed').length;
  const failed = statuses.filter((/** @type {string} */ s) => s === 'failed').length;
  const errored = statuses.filter((/** @type {string} */ s) => s === 'error').length;
  const meets = total === 0 ? false : passed / total >= report.pass_threshold;
  const totals = {
    total_checks: total, passed_checks: passed, failed_checks: failed, errored_checks: errored, points_earned: passed,
    total_points: total, percentage: total === 0 ? 0 : round1((passed / total) * 100), meets_threshold: meets, run_passed: meets && errored === 0,
  };
  let ok = true;
  for (const [k, v] of Object.entries(totals)) {
    if (report[k] !== v) {
      claims.failed(3, `report.json ${k} follows from the statuses`, `${k} is ${JSON.stringify(report[k])}, the statuses give ${JSON.stringify(v)}`, { path: REPORT, expected: String(v), observed: String(report[k]) });
      ok = false;
    }
  }
  if (ok) claims.proven(3, 'report.json totals follow from the per-check statuses', { path: REPORT });
  for (const c of report.checks) {
    const stem = checkStem(ctx, c.check_id);
    const own = `${RUN}checks/${stem}.json`;
    const data = bag.kept.get(own);
    if (data === undefined) {
      claims.failed(7, `check ${c.check_id}: result file`, `missing (the result file of check ${JSON.stringify(c.check_id)})`, { path: own });
    } else {
      let same = false;
      let why = 'differs from its entry in report.json';
      try {
        // Compared as values, not by writing both canonical forms: a check with a
        // million tags would build two ropes of millions of pieces (SPEC 5, Resources).
        same = sameJson(loadJson(data, own, false), c);
      } catch (e) {
        if (!(e instanceof JsonError)) throw e;
        why = e.message;
      }
      if (same) claims.proven(7, `check ${c.check_id}: result file equals its report entry`, { path: own });
      else claims.failed(7, `check ${c.check_id}: result file equals its report entry`, why, { path: own });
    }
    const wantScore = c.status === 'passed' ? 1 : 0;
    if (c.score !== wantScore) claims.failed(7, `check ${c.check_id}: score follows its status`, `score ${c.score} with status ${c.status}`, { path: REPORT, expected: String(wantScore), observed: String(c.score) });
    const outName = `${RUN}checks/${stem}.stdout.txt`;
    const outBytes = bag.files.has(outName) ? bag.kept.get(outName) : new Uint8Array(0);
    const outTail = outBytes === undefined ? null : boundedTailOf(outBytes, stem);
    if (outTail === null) claims.failed(8, `check ${c.check_id}: stdout tail`, `${outName}: not valid UTF-8`, { path: outName });
    else if (outTail !== c.stdout) claims.failed(8, `check ${c.check_id}: stdout tail`, `stdout is not the bounded tail of ${outName}${bag.files.has(outName) ? '' : ' (absent, so empty)'}`, { path: outName });
    else if (bag.files.has(outName) && outBytes?.length === 0) claims.failed(8, `check ${c.check_id}: stdout tail`, `${outName}: empty (eval-banana writes it only for non-empty stdout)`, { path: outName });
    else claims.proven(8, `check ${c.check_id}: stdout tail`, { path: outName });
    const errName = `${RUN}checks/${stem}.stderr.txt`;
    const errText = textOf(bag, errName);
    if (errText === null) claims.failed(8, `check ${c.check_id}: stderr`, `${errName}: not valid UTF-8`, { path: errName });
    else if (errText !== c.stderr || (bag.files.has(errName) && errText === '')) claims.failed(8, `check ${c.check_id}: stderr`, `stderr differs from ${errName}`, { path: errName });
    if (c.check_type === 'harness_judge' && c.details && typeof c.details === 'object' && 'raw_response_path' in c.details) {
      const want = bag.files.has(outName) ? outName.slice(RUN.length) : null;
      if (c.details.raw_response_path !== want) claims.failed(7, `check ${c.check_id}: raw_response_path`, `details.raw_response_path is ${JSON.stringify(c.details.raw_response_path)}, expected ${JSON.stringify(want)}`, { path: REPORT });
    }
  }
  return totals;
}

/** @param {import('./bagread.mjs').Bag} bag @param {string} path */
function textOf(bag, path) {
  if (!bag.files.has(path)) return '';
  const data = bag.kept.get(path);
  if (data === undefined) return null;
  try {
    return UTF8.decode(data);
  } catch {
    return null;
  }
}

/** @param {import('./verifyctx.mjs').Ctx} ctx @param {any} report */
function checkEntries(ctx, report) {
  const { claims, bag, bundle } = ctx;
  const entries = bundle.checks;
  if (entries.length !== report.checks.length) {
    claims.failed(7, 'bundle.json has one check entry per report check', 'the number of entries differs', { path: 'data/bundle.json', expected: String(report.checks.length), observed: String(entries.length) });
  }
  const present = (/** @type {string} */ m) => (bag.files.has(m) ? m : null);
  report.checks.forEach((/** @type {any} */ c, /** @type {number} */ i) => {
    const subject = `check ${c.check_id}: bundle.json entry agrees with report.json`;
    const e = entries[i];
    if (!e) {
      claims.failed(7, subject, 'no entry in bundle.json', { path: 'data/bundle.json' });
      return;
    }
    const stem = checkStem(ctx, c.check_id);
    const want = {
      check_id: c.check_id, stem, status: c.status, check_definition_sha256: c.check_definition_sha256,
      result: `${RUN}checks/${stem}.json`, stdout: present(`${RUN}checks/${stem}.stdout.txt`),
      stderr: present(`${RUN}checks/${stem}.stderr.txt`), prompt: present(`${RUN}checks/${stem}.prompt.txt`),
    };
    const problems = Object.entries(want).filter(([k, v]) => e[k] !== v).map(([k, v]) => `${k} is ${JSON.stringify(e[k])}, expected ${JSON.stringify(v)}`);
    const rel = mapSourcePath(report.project_root, c.source_path);
    const expected = rel === null ? null : DEFS + rel;
    if (e.definition !== null && e.definition !== expected) problems.push(`definition is ${JSON.stringify(e.definition)}, but source_path maps to ${JSON.stringify(expected)}`);
    if (e.definition === null && e.script !== null) problems.push('a script is named without its definition');
    if (problems.length) claims.failed(7, subject, problems.join('; '), { path: 'data/bundle.json' });
    else claims.proven(7, subject, { path: 'data/bundle.json' });
  });
}

/** @param {import('./verifyctx.mjs').Ctx} ctx @param {any} report */
function checkDefinitions(ctx, report) {
  const { claims, bag, bundle } = ctx;
  /** @type {Map<string, any>} */
  const listed = new Map(bundle.unavailable.map((/** @type {any} */ e) => [e.ref, e]));
  /** @type {Map<string, any>} */
  const entries = new Map(bundle.checks.map((/** @type {any} */ e) => [e.check_id, e]));
  for (const c of report.checks) {
    const subject = `check ${c.check_id}: check_definition_sha256 recomputes from the bundled definition`;
    const e = entries.get(c.check_id);
    if (!e || e.definition === null) {
      const item = listed.get(c.check_id);
      if (item) claims.unprovable(7, subject, item.reason, { expected: c.check_definition_sha256, detail: item.detail });
      else claims.failed(7, subject, 'the definition is neither bundled nor listed as unavailable', { expected: c.check_definition_sha256 });
      continue;
    }
    const rel = mapSourcePath(report.project_root, c.source_path);
    const member = rel === null ? null : DEFS + rel;
    const yaml = member === null ? undefined : bag.kept.get(member);
    if (rel === null || yaml === undefined) {
      claims.failed(7, subject, rel === null ? `source_path ${JSON.stringify(c.source_path)} is not under project_root` : `${member}: not in the bag`, { path: member, expected: c.check_definition_sha256 });
      continue;
    }
    const keys = definitionKeys(yaml);
    if (keys === null) {
      claims.failed(7, subject, `${member}: YAML outside the subset this verifier reads`, { path: member, expected: c.check_definition_sha256 });
      continue;
    }
    /** @type {[string, Uint8Array][]} */
    const comps = [['definition.yaml', yaml]];
    /** @type {string|null} */
    let scriptMember = null;
    if (keys.type === 'deterministic' && keys.scriptPath !== null) {
      const at = keys.scriptPath === '' ? null : joinNormal(rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '', keys.scriptPath);
      const script = at === null ? undefined : bag.kept.get(DEFS + at);
      if (script !== undefined) {
        scriptMember = DEFS + at;
        comps.push(['referenced-script', script]);
      } else comps.push(['referenced-script-unavailable', new Uint8Array(0)]);
    }
    const scriptSubject = `check ${c.check_id}: bundle.json's script is the one its YAML names`;
    if (e.script === scriptMember) {
      if (scriptMember !== null) claims.proven(7, scriptSubject, { path: scriptMember });
    } else {
      claims.failed(7, scriptSubject, "bundle.json maps the check to a script other than the file at the path its YAML's script_path names (SPEC 10.2)", { path: 'data/bundle.json', expected: String(scriptMember), observed: String(e.script) });
    }
    const observed = framedDigest(ctx.services.sha256, EB_DEFINITION_TAG, comps);
    if (observed === c.check_definition_sha256) claims.proven(7, subject, { path: member, expected: c.check_definition_sha256, observed });
    else claims.failed(7, subject, 'the bundled definition does not recompute to the recorded digest', { path: member, expected: c.check_definition_sha256, observed });
    if (keys.script === '' && keys.scriptPath !== null) {
      claims.failed(7, `check ${c.check_id}: the script its digest covers is the one that ran`, 'the YAML has an empty inline script beside a script_path: the digest covers a script that did not run', { path: member });
    }
  }
}

/** @param {import('./verifyctx.mjs').Ctx} ctx @param {any} report */
function checkTree(ctx, report) {
  const { claims, bag, bundle } = ctx;
  const tree = new TreeBuilder(ctx.services.sha256, ctx.services.sha256Bytes);
  for (const c of report.checks) {
    const path = `${RUN}checks/${checkStem(ctx, c.check_id)}.json`;
    const data = bag.kept.get(path);
    if (data === undefined) {
      claims.failed(8, 'cases_tree recomputes', "a check's result file is missing", { path });
      return;
    }
    tree.append(data);
  }
  claims.compare(8, 'cases_tree size', String(bundle.cases_tree.tree_size), String(tree.size), { path: 'data/bundle.json', detail: 'tree_size differs from the number of checks' });
  claims.compare(8, 'cases_tree root over the check files in report order', bundle.cases_tree.root, tree.root(), { path: 'data/bundle.json', detail: 'the case tree root differs' });
}

/** @param {import('./verifyctx.mjs').Ctx} ctx */
function checkFiles(ctx) {
  const { claims, bag, bundle } = ctx;
  let ok = true;
  const paths = bundle.files.map((/** @type {any} */ f) => f.path);
  const sorted = [...new Set(paths)].sort(byteOrder);
  if (sorted.length !== paths.length || sorted.some((p, i) => p !== paths[i])) {
    claims.failed(10, 'bundle.json files are unique and sorted by path', 'duplicate or unsorted paths', { path: 'data/bundle.json' });
    ok = false;
  }
  /** @type {Map<string, any>} */
  const named = new Map();
  for (const item of bundle.files) {
    named.set(item.path, item);
    const info = bag.files.get(item.path);
    if (!info) {
      claims.failed(10, 'every named file is present', 'bundle.json names a file the bag lacks', { path: item.path, expected: item.digest });
      ok = false;
    } else if ('sha256:' + info.sha256 !== item.digest || info.size !== item.size) {
      claims.failed(10, 'named file matches its digest and size', 'file differs from bundle.json', { path: item.path, expected: `${item.digest} (${item.size} bytes)`, observed: `sha256:${info.sha256} (${info.size} bytes)` });
      ok = false;
    }
  }
  for (const p of [...bag.files.keys()].filter((p) => p.startsWith('data/') && p !== 'data/bundle.json' && !named.has(p)).sort(byteOrder)) {
    claims.failed(10, 'every file is named by bundle.json', 'file under data/ that bundle.json does not name', { path: p, observed: 'sha256:' + /** @type {any} */ (bag.files.get(p)).sha256 });
    ok = false;
  }
  const referenced = new Set();
  for (const e of bundle.checks) {
    for (const k of ['result', 'stdout', 'stderr', 'prompt', 'definition', 'script']) {
      if (e[k] === null) continue;
      referenced.add(e[k]);
      if (!named.has(e[k])) {
        claims.failed(10, 'every file a check names is in files', "not among bundle.json's files", { path: e[k] });
        ok = false;
      }
    }
  }
  for (const p of [...named.keys()].filter((p) => p.startsWith(DEFS) && !referenced.has(p)).sort(byteOrder)) {
    claims.failed(10, 'every bundled definition file belongs to a check', 'no check names this definition or script', { path: p });
    ok = false;
  }
  if (ok) claims.proven(10, `accounting: ${named.size} files named with their digests; every file under data/ is named`);
}

/** @param {import('./verifyctx.mjs').Ctx} ctx @param {any} report */
function checkListing(ctx, report) {
  const { claims, bag, bundle } = ctx;
  /** @type {Map<string, any>} */
  const checks = new Map(report ? report.checks.map((/** @type {any} */ c) => [c.check_id, c]) : []);
  /** @type {Map<string, any>} */
  const entries = new Map(bundle.checks.map((/** @type {any} */ e) => [e.check_id, e]));
  const seen = new Set();
  for (const item of bundle.unavailable) {
    const subject = `listed definition ${item.ref} (${item.reason})`;
    let problem = null;
    const e = entries.get(item.ref);
    if (item.kind !== 'definition') problem = `eval-banana bundles list definitions only, not ${item.kind}`;
    else if (seen.has(item.ref)) problem = 'listed more than once';
    else if (!e) problem = 'not a check of the run';
    else if (report && checks.has(item.ref) && item.digest !== checks.get(item.ref).check_definition_sha256) problem = 'digest is not the recorded check_definition_sha256';
    else if (report && checks.has(item.ref) && (() => {
      const rel = mapSourcePath(report.project_root, checks.get(item.ref).source_path);
      return rel !== null && bag.files.has(DEFS + rel);
    })()) problem = 'listed, yet its definition is in the bundle';
    else if (e.definition !== null || e.script !== null) problem = 'listed, yet bundle.json names its bundled definition';
    else if (item.reason === 'definition_digest_mismatch' && !isDigest(item.detail)) problem = 'definition_digest_mismatch must record the observed digest';
    else if (item.reason === 'definition_digest_mismatch' && item.detail === item.digest) problem = 'the observed digest equals the recorded one: nothing mismatched';
    seen.add(item.ref);
    if (problem === null) claims.proven(10, subject + ' agrees with the bundle', { expected: item.digest });
    else claims.failed(10, subject, problem, { expected: item.digest });
  }
}
