// @ts-check
/** What one verification holds while its claim groups run. */
import { Claims } from './claims.mjs';
import { hex } from './util.mjs';

/**
 * @typedef {{expectBundleDigest?: string|null, expectReportDigest?: string|null, strict?: boolean,
 *   maxBytes?: number}} CoreOptions
 * @typedef {{sha256: import('./bagread.mjs').HashFactory, sha256Bytes?: import('./bagread.mjs').BytesHash,
 *   validators: Record<string, import('./schema.mjs').Validator>}} Services
 */

export class Ctx {
  /**
   * @param {import('./bagread.mjs').Bag} bag @param {any} bundle
   * @param {boolean} bundleCanonical whether data/bundle.json's bytes are its JCS form
   * @param {CoreOptions} options @param {Services} services @param {string|null} archiveSha256
   */
  constructor(bag, bundle, bundleCanonical, options, services, archiveSha256) {
    this.bag = bag;
    this.bundle = bundle;
    this.bundleCanonical = bundleCanonical;
    this.options = options;
    this.services = services;
    this.archiveSha256 = archiveSha256;
    this.claims = new Claims();
  }

  /** `sha256:` and the hex SHA-256 of bytes. @param {Uint8Array} data */
  digestOf(data) {
    const h = this.services.sha256();
    h.update(data);
    return 'sha256:' + h.hex();
  }

  /** The raw SHA-256 of bytes. @param {Uint8Array[]} parts */
  rawSha256(...parts) {
    const h = this.services.sha256();
    for (const p of parts) h.update(p);
    return h.hex();
  }

  /** @param {string|null|undefined} path */
  fileDigest(path) {
    if (path == null) return null;
    const f = this.bag.files.get(path);
    return f === undefined ? null : 'sha256:' + f.sha256;
  }

  /** @param {string|null|undefined} path */
  present(path) {
    return path != null && this.bag.files.has(path);
  }

  /**
   * The first problem of a value against a named schema, or null.
   * @param {string} name @param {unknown} value @param {string} source
   */
  schemaProblem(name, value, source) {
    const p = this.services.validators[name].problem(value);
    return p === null ? null : `${source}: ${p}`;
  }
}

export { hex };
