// @ts-check
/**
 * The Node services the core is given: SHA-256 from node:crypto, SHA-512 and Ed25519
 * through WebCrypto, the contract's JSON Schemas read from the repository's schemas/.
 * The only module of src/ that imports node: modules.
 */
import { createHash, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { validators } from './schema.mjs';

export const SCHEMA_NAMES = ['bundle', 'eb-bundle', 'report-body', 'envelope', 'suite', 'scorer', 'dataset-manifest', 'check-result', 'case', 'evidence-manifest', 'case-proof'];

/** @returns {import('./bagread.mjs').Hasher} */
export function sha256() {
  const h = createHash('sha256');
  return {
    update(d) {
      h.update(d);
    },
    hex() {
      return h.digest('hex');
    },
  };
}

/** @param {Uint8Array} data */
export async function sha512(data) {
  return new Uint8Array(await webcrypto.subtle.digest('SHA-512', data));
}

/** @param {Uint8Array} key @param {Uint8Array} sig @param {Uint8Array} msg */
export async function verifyEd25519(key, sig, msg) {
  const k = await webcrypto.subtle.importKey('raw', key, { name: 'Ed25519' }, false, ['verify']);
  return webcrypto.subtle.verify('Ed25519', k, sig, msg);
}

/** @type {Record<string, import('./schema.mjs').Validator> | undefined} */
let cached;

/** The contract's schemas, read once from the repository. */
export function schemaValidators() {
  if (!cached) {
    /** @type {Record<string, any>} */
    const docs = {};
    for (const name of SCHEMA_NAMES) {
      const url = new URL(`../../schemas/${name}.schema.json`, import.meta.url);
      docs[name] = JSON.parse(readFileSync(fileURLToPath(url), 'utf8'));
    }
    cached = validators(docs);
  }
  return cached;
}

/** Everything verifyBundle needs from Node. */
export function nodeServices() {
  return { sha256, sha512, verifyEd25519, validators: schemaValidators() };
}
