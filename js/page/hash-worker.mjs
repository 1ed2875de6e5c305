// @ts-check
/**
 * The page's archive hasher (SPEC 15 admits `worker-src blob:` for it): the verifying
 * thread transfers to it each slice of the archive it has read, once the zstd layer is
 * done with it, in order, and then an end; it acknowledges each slice once hashed and
 * answers the end with the SHA-256 (hash-wasm, streaming) and the size of what it was
 * given, or with the error. So the archive is
 * read once, and what is hashed is exactly what was verified; the verifying thread
 * decompresses and checks meanwhile.
 */
import { createSHA256 } from 'hash-wasm';

/** @type {Promise<any>} */
const hasher = createSHA256().then((h) => {
  h.init();
  return h;
});
let size = 0;
/** Messages are handled one after another, in the order they came. */
let queue = Promise.resolve();
// Running at all says this thread started (a policy may refuse it after construction):
// the verifying thread sends nothing before this.
self.postMessage({ ready: true });

self.onmessage = (/** @type {MessageEvent<{slice?: ArrayBuffer, end?: boolean}>} */ e) => {
  const { slice, end } = e.data ?? {};
  queue = queue.then(async () => {
    try {
      const h = await hasher;
      if (slice instanceof ArrayBuffer) {
        h.update(new Uint8Array(slice));
        size += slice.byteLength;
        // The verifying thread holds back while too many bytes wait here.
        self.postMessage({ hashed: slice.byteLength });
      }
      if (end) self.postMessage({ sha256: h.digest('hex'), size });
    } catch (err) {
      self.postMessage({ error: String((err && /** @type {Error} */ (err).message) || err) });
    }
  });
};
