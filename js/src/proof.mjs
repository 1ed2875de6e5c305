// @ts-check
/** check-proof (SPEC 11.4) — filled in below. */
export async function checkProof() { return { exit_code: 3, error: 'not yet' }; }
export function proofLines() { return []; }
