// @ts-check
/** The library face of the second verifier: the core, free of Node-only APIs. */
export { verifyBundle, DEFAULT_MAX_BYTES } from './verify.mjs';
export { checkProof } from './proof.mjs';
export { humanLines, TOOL } from './record.mjs';
export { validators } from './schema.mjs';
export { parseAllowedSigners } from './sshsig.mjs';
