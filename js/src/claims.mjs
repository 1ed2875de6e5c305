// @ts-check
/** The verifier's result model (SPEC 5): claims, their states, the verdict. */

export const GROUPS = /** @type {Record<number, string>} */ ({
  1: 'bagit', 2: 'bundle', 3: 'report', 4: 'suite', 5: 'scorers', 6: 'datasets',
  7: 'checks', 8: 'cases', 9: 'evidence', 10: 'accounting', 11: 'coherence',
});

/**
 * A claim as the record writes it (its fields in the record's order, group_name with
 * them: the record holds these objects, not copies of them).
 * @typedef {{group: number, group_name: string, subject: string, state: 'proven'|'unprovable'|'failed',
 *   path: string|null, expected: string|null, observed: string|null,
 *   reason: string|null, detail: string|null}} Claim
 * @typedef {{path?: string|null, expected?: string|null, observed?: string|null, detail?: string|null}} Extra
 */

export class Claims {
  constructor() {
    /** @type {Claim[]} */
    this.items = [];
  }

  /** @param {number} group @param {string} subject @param {Extra} [x] */
  proven(group, subject, x = {}) {
    this.items.push({ group, group_name: GROUPS[group], subject, state: 'proven', path: x.path ?? null, expected: x.expected ?? null, observed: x.observed ?? null, reason: null, detail: null });
  }

  /** @param {number} group @param {string} subject @param {string} detail @param {Extra} [x] */
  failed(group, subject, detail, x = {}) {
    this.items.push({ group, group_name: GROUPS[group], subject, state: 'failed', path: x.path ?? null, expected: x.expected ?? null, observed: x.observed ?? null, reason: null, detail: detail || 'failed' });
  }

  /** @param {number} group @param {string} subject @param {string} reason @param {Extra} [x] */
  unprovable(group, subject, reason, x = {}) {
    this.items.push({ group, group_name: GROUPS[group], subject, state: 'unprovable', path: x.path ?? null, expected: x.expected ?? null, observed: x.observed ?? null, reason, detail: x.detail ?? null });
  }

  /**
   * Proven when expected equals observed (both present), else failed.
   * @param {number} group @param {string} subject @param {string|null|undefined} expected
   * @param {string|null|undefined} observed @param {Extra} [x]
   */
  compare(group, subject, expected, observed, x = {}) {
    if ((expected ?? null) === (observed ?? null)) {
      this.proven(group, subject, { path: x.path, expected, observed });
      return true;
    }
    const detail = x.detail ?? 'digest differs';
    this.failed(group, subject, detail, { path: x.path, expected: expected ?? null, observed: observed ?? null });
    return false;
  }
}

/**
 * What --strict does: every unprovable claim becomes a failure naming its reason.
 * @param {Claim[]} claims @param {boolean} strict
 */
export function applyStrict(claims, strict) {
  if (!strict) return claims;
  return claims.map((c) =>
    c.state === 'unprovable'
      ? { ...c, state: /** @type {const} */ ('failed'), detail: `--strict: unprovable (${c.reason})` }
      : c,
  );
}
