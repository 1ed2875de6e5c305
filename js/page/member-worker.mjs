// @ts-check
/**
 * The page's member hasher (SPEC 15 admits `worker-src blob:` for it): the verifying
 * thread copies each member of 2 KiB to 16 MiB into a batch and transfers the batch
 * here; this thread answers with the hex SHA-256 of each span, by WebCrypto (which in
 * Chromium hashes on the calling thread: here, not the verifying one), and the batch
 * itself, or with the error. Batches are answered by their id, in whatever order they finish.
 */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** @param {ArrayBuffer} digest */
function hex(digest) {
  const b = new Uint8Array(digest);
  let s = '';
  for (let i = 0; i < b.length; i++) s += HEX[b[i]];
  return s;
}

// Running at all says this thread started (a policy may refuse it after construction):
// the verifying thread sends no batch before this.
self.postMessage({ ready: true });

self.onmessage = async (/** @type {MessageEvent<{id: number, buffer: ArrayBuffer, spans: number[]}>} */ e) => {
  const { id, buffer, spans } = e.data;
  try {
    /** @type {Promise<ArrayBuffer>[]} */
    const digests = [];
    for (let i = 0; i < spans.length; i += 2) digests.push(crypto.subtle.digest('SHA-256', new Uint8Array(buffer, spans[i], spans[i + 1])));
    // The batch goes back (transferred) for the verifying thread to fill again: a fresh
    // buffer would cost a page fault every 4 KiB as it is first written.
    self.postMessage({ id, digests: (await Promise.all(digests)).map(hex), buffer }, [buffer]);
  } catch (err) {
    self.postMessage({ id, error: String((err && /** @type {Error} */ (err).message) || err) });
  }
};
