// @ts-check
/** The framed digest v1 of SPEC 2: sha256(TAG || 0x00 || C1 || C2 ...). */
import { ENC } from './util.mjs';

export const SCORER_TAG = 'evalbook/scorer-version-sha256/v1';
export const EB_DEFINITION_TAG = 'eval-banana/check-definition-sha256/v1';

/** @param {number} n */
function u64be(n) {
  const out = new Uint8Array(8);
  let v = BigInt(n);
  for (let i = 7; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/**
 * @param {import('./bagread.mjs').HashFactory} sha256 @param {string} tag
 * @param {[string, Uint8Array][]} components
 */
export function framedDigest(sha256, tag, components) {
  const h = sha256();
  h.update(ENC.encode(tag));
  h.update(new Uint8Array([0]));
  for (const [name, content] of components) {
    const n = ENC.encode(name);
    h.update(u64be(n.length));
    h.update(n);
    h.update(u64be(content.length));
    h.update(content);
  }
  return 'sha256:' + h.hex();
}
