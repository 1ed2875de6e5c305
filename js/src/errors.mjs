// @ts-check
/** Errors as the verifier reports them (SPEC 8): a one-line message and an exit code. */

/** No verdict is possible: unreadable, unsafe or malformed input (exit 3). */
export class InputError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'InputError';
    this.exitCode = 3;
  }
}

/** A bad option or argument (exit 2). */
export class UsageError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'UsageError';
    this.exitCode = 2;
  }
}

/** A JSON document breaks SPEC 2 (strict reading or JCS). */
export class JsonError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'JsonError';
  }
}

/** A signature or proof that does not verify; the message says why. */
export class TrustError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'TrustError';
  }
}
