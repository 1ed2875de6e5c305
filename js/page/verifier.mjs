// @ts-check
/**
 * The page's verification in a worker of its own (SPEC 15 admits `worker-src blob:`),
 * started from the page's own script, so that each verification's memory ends with it:
 * a hostile bundle's record and the garbage of checking it (hundreds of MB) go when its
 * worker is ended, not when the page's collector gets round to them, and one tab
 * verifying such bundles one after another stays under the bound. The worker keeps the
 * record (for saving) and sends the page only its view (page/engine.mjs `viewOf`).
 * Where no worker can start (the constructor throws, or a policy refuses it with an
 * error event before it runs), the page's thread verifies, as before.
 *
 * Messages: the worker says {ready} first; the page sends {verify: inputs}; the worker
 * answers {progress: n} (when the whole percentage moves), then {view} or {failed:
 * message}; the page may then send {save} any number of times, each answered {blob} or
 * {failed: message}.
 */
import { fillPool, recordBlob, verifyFile, viewOf } from './engine.mjs';

/** @typedef {import('./engine.mjs').Inputs} Inputs */

/**
 * The verifying worker of the run in progress (or done, kept for saving): `saving`
 * counts the saves asked of it and not yet answered, `retire` ends it once they are.
 * @typedef {{worker: Worker, saving: number, retire: (() => void)|null}} Current
 * @type {Current|null}
 */
let current = null;
/** Counts the verifications asked for and ended: a run waiting to start checks it is still the last. */
let ticket = 0;
/** When a verifying worker was last ended (performance.now()). */
let endedAt = -Infinity;
/** A worker ended while saving, kept until its saves are answered (at most SAVE_GRACE_MS). @type {Promise<void>|null} */
let retiring = null;
/**
 * A new verifying worker starts at least this long after the last one was ended: ending
 * one returns at once, but its thread gives its memory back only as it winds down, and
 * runs started one on another's heels (an auditor pressing Verify again and again, or
 * changing the bundle mid-run) held several runs' memory at once: 850 MB for twenty
 * presses. Presses within the wait are one run: the last.
 */
const SETTLE_MS = 1000;
/** A save asked for before the inputs changed is still written, if within this long. */
const SAVE_GRACE_MS = 30_000;
/**
 * Where no worker starts, this thread verifies, and the garbage of one run is still
 * held when the next begins: three hostile bundles in a row took the tab to 672 MB, and
 * runs each under any threshold of size (claims, text, archive; or ending in an error
 * after reading 15,000 names) added up past 600 MB all the same. So this thread verifies
 * one bundle per load of the page: from the moment it starts one, the page asks to be
 * reloaded before it verifies another.
 */
let threadHeld = false;

/** Whether this thread has verified (or is verifying) a bundle since the page was loaded. */
export function reloadNeeded() {
  return threadHeld;
}

/** @param {Worker} worker */
function stop(worker) {
  worker.terminate();
  endedAt = performance.now();
}

/**
 * The verifying worker ended, with all it held (its own hashing workers too); one
 * writing a record the auditor asked to save is ended once that is done.
 */
export function endVerification() {
  ticket++;
  const c = current;
  current = null;
  if (c === null) return;
  if (c.saving === 0) {
    stop(c.worker);
    return;
  }
  retiring = new Promise((resolve) => {
    const timer = setTimeout(() => c.retire?.(), SAVE_GRACE_MS);
    c.retire = () => {
      c.retire = null;
      clearTimeout(timer);
      stop(c.worker);
      retiring = null;
      resolve();
    };
  });
}

/** @typedef {{view: ReturnType<typeof viewOf>, save: () => Promise<Blob>, seconds: number, onThisThread: boolean}} Verified */

/**
 * Verify on this thread: the fallback, and the whole of it where workers cannot start.
 * @param {Inputs} inputs @param {(n: number) => void} progress @returns {Promise<Verified>}
 */
async function onThisThread(inputs, progress) {
  if (threadHeld) throw new Error(RELOAD);
  threadHeld = true;
  const began = performance.now();
  const record = await verifyFile(inputs, progress);
  return { view: viewOf(record), save: () => recordBlob(record), seconds: (performance.now() - began) / 1000, onThisThread: true };
}

/** What the page says when this thread has verified a bundle already. */
export const RELOAD = 'this page could not start a worker, so it verifies one bundle per load: reload it to verify another';

/** @param {unknown} e */
function messageOf(e) {
  return String((e && /** @type {Error} */ (e).message) || e);
}

/**
 * Verify `inputs` in a worker started from `source` (the page's own script), or on this
 * thread when none can start. Rejects with what stopped the verification. `seconds` is
 * the time it took, from when it started (not from when it was asked for).
 * @param {string|null} source @param {Inputs} inputs @param {(n: number) => void} progress
 * @returns {Promise<Verified>}
 */
export async function startVerification(source, inputs, progress) {
  endVerification();
  const mine = ticket;
  if (retiring !== null) await retiring;
  const wait = endedAt + SETTLE_MS - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  if (mine !== ticket) throw new Error('the verification was forgotten before it started');
  if (source === null) return onThisThread(inputs, progress);
  const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  /** @type {Worker} */
  let worker;
  try {
    worker = new Worker(url);
  } catch {
    URL.revokeObjectURL(url);
    return onThisThread(inputs, progress);
  }
  /** @type {Current} */
  const c = { worker, saving: 0, retire: null };
  current = c;
  const w = worker;
  const began = performance.now();
  return await new Promise((resolve, reject) => {
    let state = /** @type {'starting'|'verifying'|'done'} */ ('starting');
    /** The saves asked for and not yet answered, in order. @type {{resolve: (b: Blob) => void, reject: (e: Error) => void}[]} */
    const saves = [];
    const answered = () => {
      c.saving = saves.length;
      if (c.saving === 0) c.retire?.();
    };
    const save = () =>
      new Promise((res, rej) => {
        if (current !== c) {
          rej(new Error('the verification was forgotten'));
          return;
        }
        saves.push({ resolve: res, reject: rej });
        c.saving = saves.length;
        w.postMessage({ save: true });
      });
    w.onmessage = (e) => {
      const m = e.data ?? {};
      if (state === 'starting' && m.ready === true) {
        URL.revokeObjectURL(url);
        state = 'verifying';
        w.postMessage({ verify: inputs });
      } else if (state === 'verifying' && typeof m.progress === 'number') progress(m.progress);
      else if (state === 'verifying' && m.view) {
        state = 'done';
        resolve({ view: m.view, save, seconds: (performance.now() - began) / 1000, onThisThread: false });
      } else if (state === 'verifying' && typeof m.failed === 'string') {
        state = 'done';
        reject(new Error(m.failed));
      } else if (state === 'done' && saves.length) {
        const s = /** @type {{resolve: (b: Blob) => void, reject: (e: Error) => void}} */ (saves.shift());
        if (m.blob instanceof Blob) s.resolve(m.blob);
        else s.reject(new Error(`saving the record failed: ${m.failed ?? 'no record'}`));
        answered();
      }
    };
    w.onerror = (e) => {
      e.preventDefault();
      if (state === 'starting') {
        // It never ran, so it holds nothing: this thread verifies.
        w.terminate();
        URL.revokeObjectURL(url);
        if (current === c) current = null;
        onThisThread(inputs, progress).then(resolve, reject);
        return;
      }
      stop(w);
      if (current === c) current = null;
      const err = new Error(`the verifying worker failed${e.message ? `: ${e.message}` : ''}`);
      if (state === 'verifying') reject(err);
      for (const s of saves.splice(0)) s.reject(err);
      answered();
      state = 'done';
    };
  });
}

/**
 * The worker's side: answer the page's messages (above) from the script the page runs.
 * The record stays here, for saving, until the page ends this worker.
 */
export function serveVerification() {
  const scope = /** @type {any} */ (self);
  /** @type {any} */
  let record = null;
  const pool = fillPool().catch(() => {});
  scope.onmessage = async (/** @type {MessageEvent<any>} */ e) => {
    const m = e.data ?? {};
    if (m.verify) {
      /** @type {Inputs} */
      const inputs = m.verify;
      const size = Math.max(1, inputs.file.size);
      let last = -1;
      try {
        await pool;
        record = await verifyFile(inputs, (n) => {
          const pct = Math.floor((100 * n) / size);
          if (pct === last) return;
          last = pct;
          scope.postMessage({ progress: n });
        });
        scope.postMessage({ view: viewOf(record) });
      } catch (err) {
        scope.postMessage({ failed: messageOf(err) });
      }
    } else if (m.save) {
      try {
        if (record === null) throw new Error('no record');
        scope.postMessage({ blob: await recordBlob(record) });
      } catch (err) {
        scope.postMessage({ failed: messageOf(err) });
      }
    }
  };
  scope.postMessage({ ready: true });
}
