// @ts-check
/**
 * The page's archive hasher (SPEC 15 admits `worker-src blob:` for it): given the File
 * the page verifies, it reads it once more, on its own thread, and answers with the
 * SHA-256 (hash-wasm, streaming) and the size of what it read, or with the error. The
 * verifying thread decompresses and checks meanwhile; the two reads must agree on the
 * size (verifyBundle's archiveSha256).
 */
import { createSHA256 } from 'hash-wasm';

self.onmessage = async (/** @type {MessageEvent<File>} */ e) => {
  try {
    const h = await createSHA256();
    h.init();
    const reader = e.data.stream().getReader();
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      h.update(value);
      size += value.length;
    }
    self.postMessage({ sha256: h.digest('hex'), size });
  } catch (err) {
    self.postMessage({ error: String((err && /** @type {Error} */ (err).message) || err) });
  }
};
