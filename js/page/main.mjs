// @ts-check
/**
 * The offline verifier page (SPEC 15): choose or drop a bundle (and optionally an
 * allowed_signers file, an identity, an expected digest), verify it in the browser
 * with the same core as the Node command, show the result as SPEC 14 lays it out, and
 * save the verification record as JSON. Every text from the bundle reaches the page
 * through textContent after the one escaping function (shown); no request leaves it.
 * The same script, started as a worker, is the verifying worker (page/verifier.mjs).
 */
import { shown } from '../src/textsafe.mjs';
import { REASON_WORDS, signatureLine } from '../src/record.mjs';
import { UTF8 } from '../src/util.mjs';
import { endWorkers, fillPool } from './engine.mjs';
import { RELOAD, endVerification, reloadNeeded, serveVerification, startVerification } from './verifier.mjs';

/** This page's own script, the verifying worker's source (null where it cannot be read). */
const OWN_SOURCE = typeof document === 'undefined' ? null : document.currentScript?.textContent ?? null;

/** @param {string} id */
function $(id) {
  return /** @type {HTMLElement} */ (document.getElementById(id));
}

/**
 * An element with text (always through textContent) and children.
 * @param {string} tag @param {{text?: unknown, shownText?: string, cls?: string, attrs?: Record<string, string>}} [o]
 * @param {Node[]} [children]
 */
function el(tag, o = {}, children = []) {
  const e = document.createElement(tag);
  if (o.text !== undefined) e.textContent = shown(o.text);
  // Text the view already put through shown() (and cut): never escaped twice.
  if (o.shownText !== undefined) e.textContent = o.shownText;
  if (o.cls) e.className = o.cls;
  for (const [k, v] of Object.entries(o.attrs ?? {})) e.setAttribute(k, v);
  for (const c of children) e.appendChild(c);
  return e;
}

/** @param {[string, unknown][]} rows @param {boolean} [alreadyShown] the values came through shown() */
function facts(rows, alreadyShown = false) {
  const dl = el('dl', { cls: 'facts' });
  for (const [k, v] of rows) {
    dl.appendChild(el('dt', { text: k }));
    if (v === null || v === undefined) dl.appendChild(el('dd', { text: '-' }));
    else dl.appendChild(el('dd', alreadyShown ? { shownText: String(v) } : { text: v }));
  }
  return dl;
}

/** @param {string} id @param {string} suffix */
function quote(id, suffix = '') {
  return `'${String(id).replace(/'/g, "'\\''")}'${suffix}`;
}

/**
 * The one place the result pane is emptied: whatever starts a new verification (the
 * Verify button, a dropped file) or changes what it would check (a new bundle, signers
 * file, identity or expected digest) clears the previous result, disables the save
 * button and forgets the saved record first, so a verdict on screen is only ever the
 * one of the inputs the form shows. A run still going when that happens is forgotten:
 * its result and progress are dropped (each run checks the generation it started in).
 */
let generation = 0;

/** The bundle whose result is shown (null when none is). @type {string|null} */
let shownFor = null;

/**
 * The URL of the record last saved: a URL keeps its Blob (the whole record, 150 MB and
 * more for a hostile bundle) in the browser for as long as the page lives, so only the
 * last one is kept, for its download to start, and none once the result is cleared.
 * @type {string|null}
 */
let savedUrl = null;

function forgetSaved() {
  if (savedUrl !== null) URL.revokeObjectURL(savedUrl);
  savedUrl = null;
}

function clearResult() {
  generation++;
  endVerification();
  forgetSaved();
  endWorkers();
  $('result').replaceChildren();
  const save = /** @type {HTMLButtonElement} */ ($('save'));
  save.disabled = true;
  save.onclick = null;
  shownFor = null;
  delete (/** @type {any} */ (window).verificationView);
}

/**
 * Lines of text shown in one <pre>: each line escaped on its own (shown() writes a
 * newline as \x0a), joined by the page's own newlines.
 * @param {string[]} lines
 */
function preLines(lines) {
  const pre = el('pre');
  lines.forEach((line, i) => {
    if (i) pre.appendChild(document.createTextNode('\n'));
    pre.appendChild(document.createTextNode(shown(line)));
  });
  return pre;
}

/**
 * The commands that reproduce this check, with the options the form gave.
 * @param {string} fileName @param {{signers: string|null, identity: string|null, expect: string|null}} used
 */
function reproduce(fileName, used) {
  let args = quote(fileName);
  if (used.expect) args += ` --expect-bundle-digest ${used.expect}`;
  if (used.signers) args += ` --allowed-signers ${quote(used.signers)}`;
  if (used.identity) args += ` --identity ${quote(used.identity)}`;
  return [`node js/verify-bundle.mjs ${args}`, `evalbook-bundle verify ${args}`];
}

/**
 * Show a verification (its view: page/engine.mjs viewOf) and arm the save button.
 * @param {ReturnType<typeof import('./engine.mjs').viewOf>} r @param {() => Promise<Blob>} saveRecord @param {string} fileName
 * @param {{signers: string|null, identity: string|null, expect: string|null}} used
 */
function render(r, saveRecord, fileName, used) {
  const out = $('result');
  out.replaceChildren();
  const verdictWord = r.verdict === 'verified' ? 'VERIFIED' : r.verdict === 'failed' ? 'FAILED' : 'ERROR';
  out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-trust' } }, [
    el('h2', { text: 'Trust', attrs: { id: 'h-trust' } }),
    el('p', { text: r.anchor.signer ? `Signed by ${r.anchor.signer}` : r.anchor.description }),
  ]));
  out.appendChild(el('section', { cls: `verdict ${r.verdict}`, attrs: { 'aria-labelledby': 'h-verdict', id: 'verdict' } }, [
    el('h2', { text: 'Verdict', attrs: { id: 'h-verdict' } }),
    el('p', { cls: 'word', text: verdictWord }),
    el('p', { text: r.verdict === 'error' ? `No verdict possible: ${r.error}` : `${r.counts.proven} proven, ${r.counts.unprovable} unprovable, ${r.counts.failed} failed${r.strict_forecast ? ` (with --strict: ${r.strict_forecast})` : ''}` }),
  ]));
  if (r.verdict !== 'error') {
    const env = r.envelope;
    const rows = /** @type {[string, unknown][]} */ ([
      ['Report', r.report_id], ['Report digest', r.report_digest], ['Result (as issued)', r.report_result],
      ['Issued at', r.report_issued_at], ['Bundle digest', r.bundle_digest], ['Bundle schema', r.bundle_schema],
    ]);
    if (env) rows.push(['Envelope', env.status === 'superseded' ? `superseded by ${env.superseded_by} at ${env.superseded_at}: ${env.reason}` : env.status]);
    for (const [k, v] of Object.entries(r.summary)) rows.push([k, v]);
    out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-report' } }, [el('h2', { text: 'Report', attrs: { id: 'h-report' } }), facts(rows)]));
    // Claim groups: counts per group, as a table.
    const table = el('table', {}, [el('caption', { text: 'Claims by group' }), el('thead', {}, [el('tr', {}, ['Group', 'Proven', 'Unprovable', 'Failed'].map((h) => el('th', { text: h, attrs: { scope: 'col' } })))])]);
    const body = el('tbody');
    for (const g of r.groups) {
      body.appendChild(el('tr', {}, [el('th', { text: g.group, attrs: { scope: 'row' } }), el('td', { text: String(g.proven) }), el('td', { text: String(g.unprovable) }), el('td', { text: String(g.failed) })]));
    }
    table.appendChild(body);
    out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-claims' } }, [el('h2', { text: 'Claims', attrs: { id: 'h-claims' } }), table]));
    const failed = r.failed;
    if (r.failed_count) {
      const list = el('ol', { cls: 'failed' });
      for (const c of failed) {
        list.appendChild(el('li', {}, [
          el('p', { cls: 'subject', shownText: `[${shown(c.group)} ${shown(c.group_name)}] ${c.subject}` }),
          el('p', { shownText: c.detail ?? '-' }),
          facts([['Path', c.path], ['Expected', c.expected], ['Observed', c.observed]], true),
        ]));
      }
      const more = r.failed_count - failed.length;
      const rest = more > 0 ? [el('p', { cls: 'more', text: `and ${more} more failed claims, not listed here (the first ${failed.length} are): the saved verification record holds every one` })] : [];
      out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-failed', id: 'failed' } }, [el('h2', { text: `Failed claims (${r.failed_count})`, attrs: { id: 'h-failed' } }), list, ...rest]));
    }
    const reasons = Object.entries(r.unprovable_by_reason);
    if (reasons.length) {
      const list = el('ul');
      for (const [reason, n] of reasons) list.appendChild(el('li', { text: `${reason}: ${n} - ${REASON_WORDS[reason] ?? 'a reason this contract does not define'}` }));
      out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-unprovable' } }, [el('h2', { text: 'Unprovable, by reason', attrs: { id: 'h-unprovable' } }), list]));
    }
  }
  const sigs = r.signatures;
  if (sigs.length) {
    const list = el('ul');
    for (const s of sigs) list.appendChild(el('li', { text: `${shown(s.where)}: ${signatureLine(s)}` }));
    out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-sigs' } }, [el('h2', { text: 'Signatures', attrs: { id: 'h-sigs' } }), list]));
  }
  out.appendChild(el('section', { attrs: { 'aria-labelledby': 'h-repro' } }, [
    el('h2', { text: 'Reproduce', attrs: { id: 'h-repro' } }),
    facts([['Tool', `${r.tool.name} ${r.tool.version}`], ['Checked at', r.verified_at], ['Archive SHA-256', r.archive ? r.archive.sha256 : null], ['Archive size', r.archive ? r.archive.size : null]]),
    facts([['allowed_signers file', used.signers], ['Identity', used.identity], ['Expected bundle digest', used.expect]]),
    preLines(reproduce(fileName, used)),
  ]));
  const save = /** @type {HTMLButtonElement} */ ($('save'));
  save.disabled = false;
  save.onclick = async () => {
    /** @type {Blob} */
    let blob;
    try {
      blob = await saveRecord();
    } catch (e) {
      $('status').textContent = shown(`Could not save the record: ${/** @type {Error} */ (e).message}`);
      return;
    }
    const a = document.createElement('a');
    forgetSaved();
    savedUrl = URL.createObjectURL(blob);
    a.href = savedUrl;
    a.download = 'verification.json';
    document.body.appendChild(a);
    a.click();
    a.remove();
  };
  /** @type {any} */ (window).verificationView = r;
  document.body.dataset.state = 'done';
}

/** @param {string} message */
function refuse(message) {
  $('status').textContent = shown(message);
  document.body.dataset.state = 'done';
}

/**
 * Where this thread verified the one bundle a load allows: refused, nothing cleared (the
 * result shown, and its Save, stay), and the status says whose result that is, since
 * the form may name another bundle now.
 */
function refuseAnother() {
  const whose = shownFor === null ? '' : ` The result below is still that of ${shownFor}.`;
  $('status').textContent = shown(`Not verified: ${RELOAD}.${whose}`);
  document.body.dataset.state = 'done';
}

/** An allowed_signers file is read whole, so it is refused past this (as node js/verify-bundle.mjs refuses it). */
const MAX_SIGNERS_BYTES = 1024 * 1024;

async function run() {
  if (reloadNeeded()) {
    refuseAnother();
    return;
  }
  clearResult();
  const mine = generation;
  const file = /** @type {HTMLInputElement} */ ($('bundle')).files?.[0];
  if (!file) {
    refuse('Choose a bundle (.tar.zst) first.');
    return;
  }
  document.body.dataset.state = 'working';
  $('status').textContent = shown(`Verifying ${file.name} (${file.size} bytes)...`);
  const signersFile = /** @type {HTMLInputElement} */ ($('signers')).files?.[0];
  const identity = /** @type {HTMLInputElement} */ ($('identity')).value.trim() || null;
  const expect = /** @type {HTMLInputElement} */ ($('expect')).value.trim() || null;
  if (identity !== null && !signersFile) {
    refuse('An identity needs an allowed_signers file.');
    return;
  }
  if (expect !== null && !/^sha256:[0-9a-f]{64}$/.test(expect)) {
    refuse('The expected digest must be sha256: and 64 lowercase hex digits.');
    return;
  }
  let allowedSigners = null;
  if (signersFile && signersFile.size > MAX_SIGNERS_BYTES) {
    refuse(`The allowed_signers file ${signersFile.name} is over 1 MiB (${signersFile.size} bytes), as the Node command refuses it.`);
    return;
  }
  if (signersFile) {
    try {
      // As ssh-keygen reads it: UTF-8, a BOM kept (it is not skipped).
      allowedSigners = UTF8.decode(await signersFile.arrayBuffer());
    } catch {
      refuse(`The allowed_signers file ${signersFile.name} is not UTF-8.`);
      return;
    }
  }
  const used = { signers: signersFile ? signersFile.name : null, identity, expect };
  let lastPct = -1;
  /** @type {import('./verifier.mjs').Verified} */
  let done;
  try {
    done = await startVerification(OWN_SOURCE, { file, signers: allowedSigners, signersName: used.signers, identity, expect }, (n) => {
      if (mine !== generation) return;
      const pct = Math.floor((100 * n) / Math.max(1, file.size));
      if (pct !== lastPct) {
        lastPct = pct;
        $('status').textContent = `Verifying ${shown(file.name)}: ${pct}%`;
      }
    });
  } catch (e) {
    if (mine !== generation) return;
    $('status').textContent = shown(`Could not verify: ${/** @type {Error} */ (e).message}`);
    document.body.dataset.state = 'done';
    return;
  }
  if (mine !== generation) return; // the inputs changed while it ran
  const seconds = done.seconds;
  /** @type {any} */ (window).verifySeconds = seconds;
  const verdict = done.view.verdict;
  const outcome = verdict === 'verified' ? 'VERIFIED' : verdict === 'failed' ? 'FAILED' : 'ERROR (no verdict possible)';
  const note = done.onThisThread ? ` This page could not start a worker, so it verifies one bundle per load: reload it to verify another.` : '';
  $('status').textContent = shown(`Checked ${file.name} in ${seconds.toFixed(1)} s: ${outcome}.${note}`);
  render(done.view, done.save, file.name, used);
  shownFor = file.name;
}

/** The page: its form wired up. */
function page() {
  $('go').addEventListener('click', () => void run());
  for (const id of ['bundle', 'signers', 'identity', 'expect']) {
    $(id).addEventListener(id === 'bundle' || id === 'signers' ? 'change' : 'input', () => {
      if (reloadNeeded()) {
        refuseAnother();
        return;
      }
      clearResult();
      $('status').textContent = '';
      document.body.dataset.state = 'ready';
    });
  }
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => e.preventDefault());
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    const files = e.dataTransfer?.files;
    if (files && files.length) {
      /** @type {HTMLInputElement} */ ($('bundle')).files = files;
      void run();
    }
  });
  fillPool()
    .catch(() => {})
    .finally(() => {
      document.body.dataset.state = 'ready';
    });
}

if (typeof document === 'undefined') serveVerification();
else page();
