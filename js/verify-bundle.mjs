#!/usr/bin/env node
// @ts-check
/**
 * node js/verify-bundle.mjs BUNDLE... [--json] [--strict] [-q] [--expect-bundle-digest D]
 *   [--expect-report-digest D] [--allowed-signers F] [--identity ID] [--signature SIG]
 *   [--max-bytes N]
 * node js/verify-bundle.mjs check-proof PROOF [--json] [-q] [--allowed-signers F
 *   [--identity ID]] [--expect-bundle-digest D]
 *
 * The second verifier of SPEC 15. Results on stdout (JSON Lines with --json), errors on
 * stderr; exit 0 verified, 1 failed, 2 usage, 3 unreadable (SPEC 8).
 */
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, realpathSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { verifyBundle, DEFAULT_MAX_BYTES } from './src/verify.mjs';
import { checkProof, proofLines } from './src/proof.mjs';
import { humanLines, recordPieces } from './src/record.mjs';
import { fileChunks, localSidecars, nodeServices } from './src/node.mjs';
import { parseAllowedSigners } from './src/sshsig.mjs';
import { MAX_SIDECAR_BYTES } from './src/signatures.mjs';
import { shown, shownClipped } from './src/textsafe.mjs';
import { InputError, TrustError, UsageError } from './src/errors.mjs';
import { UTF8 } from './src/util.mjs';

// V8's optimising compiler, not the collector, is what Node's helper threads spend their
// time on (about a quarter of a verification's CPU time, in `perf` samples): without
// inlining it compiles smaller graphs, about 0.2-0.35 s less CPU a run, and the
// verifying thread is no slower. A function is optimised once it has run 15 times the
// bytecode V8 waits for by default (1,000,000 bytes, not 67,584): fewer functions are
// compiled twice or at all, the helpers' CPU time falls from 0.6 to 0.25 s on 80 to
// 150 MB archives and from 1.05 to 0.65 s on the 1 GB shape, and the verifying thread
// spends at most about as much longer. Both change how code is compiled, never what it does.
setFlagsFromString('--no-turbo-inlining');
// A full collection between bundles (several bundles in one run), as the one way to give
// back one bundle's memory before the next is read, and between the stages of one that
// leave the most behind (verifyBundle's collectGarbage).
setFlagsFromString('--expose-gc');
const collectGarbage = /** @type {() => void} */ (runInNewContext('gc'));
setFlagsFromString('--interrupt-budget=1000000');

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const USAGE = `usage: node js/verify-bundle.mjs BUNDLE... [--json] [--strict] [-q] [--expect-bundle-digest D]
       [--expect-report-digest D] [--allowed-signers F] [--identity ID] [--signature SIG] [--max-bytes N]
       node js/verify-bundle.mjs check-proof PROOF [--json] [-q] [--allowed-signers F [--identity ID]]
       [--expect-bundle-digest D]`;

const VERIFY_HELP = `${USAGE}

Verify bundles (.tar.zst archives) offline: every digest the bundle can prove (SPEC 5,
10.2, 11.3), as \`evalbook-bundle verify\` does. Each claim ends proven, unprovable
(listed as unavailable or redacted, with the reason) or failed. Without a trust anchor
(--expect-bundle-digest, --expect-report-digest or a signature from --allowed-signers)
the result shows self-consistency only.

Options:
  --expect-bundle-digest D  trust anchor: the bundle digest you expect (sha256:...)
  --expect-report-digest D  trust anchor: the report digest you expect (sha256:...)
  --allowed-signers F       OpenSSH allowed_signers file: check every signature present
                            (embedded, <archive>.sig and its countersignatures)
  --identity ID             signer identity to require (needs --allowed-signers)
  --signature SIG           a signature file to check as well (needs --allowed-signers)
  --strict                  unprovable claims fail too
  --json                    the verification record, one JSON line per bundle
                            (schemas/verification.schema.json), printed once every
                            bundle is checked, each with the run's exit code
  --max-bytes N             refuse archives that decompress to more than N bytes
                            (default 64 GiB; a guard against decompression bombs)
  -q, --quiet               no notes (this verifier prints no progress); the result is
                            printed all the same, and errors still go to stderr
  -h, --help                this text

Exit codes: 0 verified, 1 failed, 2 usage error, 3 no verdict possible (an unreadable
or unsafe archive, a malformed bundle.json); with several bundles, 1 if any failed, else
3 if any could not be checked, else 0.

Examples:
  node js/verify-bundle.mjs evalbook-bundle-rpt-x.tar.zst
  node js/verify-bundle.mjs B.tar.zst --allowed-signers allowed_signers --identity alice@example.org
  node js/verify-bundle.mjs check-proof proof.json --allowed-signers allowed_signers`;

const CHECK_PROOF_HELP = `usage: node js/verify-bundle.mjs check-proof PROOF [--json] [-q] [--allowed-signers F [--identity ID]]
       [--expect-bundle-digest D]

Check a single-case proof (SPEC 11.4, from \`evalbook-bundle prove\`) offline: the case's
leaf, its audit path to the root the bundle head names, and the head's anchor.

Options:
  --allowed-signers F       OpenSSH allowed_signers file: the head's signature anchors it
  --identity ID             signer identity to require (needs --allowed-signers)
  --expect-bundle-digest D  the bundle digest the signed head must name (sha256:...);
                            with --allowed-signers only: a digest alone anchors nothing
  --json                    the result as one JSON object (evalbook.proof_check.v1)
  -q, --quiet               accepted for symmetry; the result is printed all the same
  -h, --help                this text

PROOF may be - for standard input.

Exit codes: 0 proven, 1 not proven (the reason on stderr), 2 usage error, 3 the proof
cannot be read (malformed, too large, not a file).

Examples:
  node js/verify-bundle.mjs check-proof case-0042.proof.json --allowed-signers allowed_signers
  node js/verify-bundle.mjs check-proof - --json < case-0042.proof.json`;

/**
 * @param {string[]} argv
 * @param {Record<string, 'flag'|'value'>} spec
 */
function parseArgs(argv, spec) {
  /** @type {Record<string, any>} */
  const opts = {};
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (a.startsWith('-') && a !== '-') {
      let name = a;
      let value;
      const eq = a.indexOf('=');
      if (a.startsWith('--') && eq > 0) {
        name = a.slice(0, eq);
        value = a.slice(eq + 1);
      }
      if (name === '-h' || name === '--help') {
        opts.help = true;
        continue;
      }
      const kind = spec[name];
      if (kind === undefined) throw new UsageError(`no such option: ${name}`);
      if (kind === 'flag') {
        if (value !== undefined) throw new UsageError(`option ${name} takes no value`);
        opts[name] = true;
      } else {
        if (value === undefined) {
          if (i + 1 >= argv.length) throw new UsageError(`option ${name} requires an argument`);
          value = argv[++i];
        }
        if (opts[name] !== undefined) throw new UsageError(`option ${name} given twice`);
        opts[name] = value;
      }
    } else positional.push(a);
  }
  return { opts, positional };
}

/** @param {string|undefined} v @param {string} option */
function digestOption(v, option) {
  if (v === undefined) return null;
  if (!DIGEST.test(v)) throw new UsageError(`${option} ${JSON.stringify(v)}: not a digest (sha256: and 64 lowercase hex digits)`);
  return v;
}

/**
 * A file an option names: one that cannot be read is an input error (exit 3, SPEC 8), as
 * in the Python verifier; only a badly written option is a usage error (exit 2).
 * @param {string} path @param {string} option
 */
function readSmallFile(path, option) {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = /** @type {any} */ (e).code;
    throw new InputError(`${option}: ${path}: ${code === 'ENOENT' ? 'not found (does not exist)' : `cannot read (${code ?? e})`}`);
  }
  if (st.isDirectory()) throw new InputError(`${option}: ${path}: is a directory; a file is needed`);
  if (!st.isFile()) throw new InputError(`${option}: ${path}: not a regular file`);
  if (st.size > 1024 * 1024) throw new InputError(`${option}: ${path}: over 1 MiB`);
  try {
    return readFileSync(path);
  } catch (e) {
    throw new InputError(`${option}: ${path}: cannot read (${/** @type {any} */ (e).code ?? e})`);
  }
}

/**
 * The allowed_signers file an option names, read as ssh-keygen reads it: UTF-8 with any
 * BOM kept (ssh-keygen does not skip one), checked line by line before any bundle is
 * read. Unreadable or malformed: an input error (exit 3) naming the file and line.
 * @param {string} path
 */
function readAllowedSigners(path) {
  const data = readSmallFile(path, '--allowed-signers');
  let text;
  try {
    text = UTF8.decode(data);
  } catch {
    throw new InputError(`--allowed-signers: ${path}: not UTF-8`);
  }
  try {
    parseAllowedSigners(text, path);
  } catch (e) {
    if (e instanceof TrustError) throw new InputError(e.message);
    throw e;
  }
  return text;
}

/**
 * Whether two local paths name one file (a named --signature may be a sidecar itself).
 * @param {string} a @param {string|undefined} b
 */
function sameFile(a, b) {
  if (b === undefined) return false;
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return a === b;
  }
}

/**
 * --max-bytes: a positive whole number written in ASCII digits only (no sign, no
 * separators, no spaces); any size is accepted, as the Python verifier accepts it.
 * @param {string|undefined} v
 */
function maxBytesOption(v) {
  if (v === undefined) return DEFAULT_MAX_BYTES;
  if (!/^[0-9]+$/.test(v) || /^0+$/.test(v)) throw new UsageError(`--max-bytes ${JSON.stringify(v)}: not a positive whole number of bytes (ASCII digits, at least 1)`);
  return Math.min(Number(v), Number.MAX_SAFE_INTEGER);
}

/**
 * What `read` makes of the file an option names; an error says which file it was (the
 * `input` of evalbook.error.v1 is the file that failed, not the bundle, as in Python).
 * @template T @param {string} path @param {(path: string) => T} read @returns {T}
 */
function optionFile(path, read) {
  try {
    return read(path);
  } catch (e) {
    if (e instanceof Error) /** @type {any} */ (e).input = path;
    throw e;
  }
}

/**
 * The signature named with --signature: input, so one that cannot be read or is over
 * the 64 KiB a signature may hold is an input error (exit 3), as in the Python
 * verifier, not a usage error.
 * @param {string} path
 */
function readSignatureFile(path) {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    throw new Error(`--signature ${path}: cannot read (${/** @type {any} */ (e).code ?? e})`);
  }
  if (!st.isFile()) throw new Error(`--signature ${path}: not a regular file`);
  if (st.size > MAX_SIDECAR_BYTES) throw new Error(`--signature ${path}: signature of ${st.size} bytes, over the ${MAX_SIDECAR_BYTES} bytes a signature may hold`);
  return readFileSync(path);
}

/**
 * Output written synchronously to its file descriptor, never through process.stdout:
 * Node queues a stream's writes to a pipe in memory, so a slow reader (`| less`) of a
 * 122,000-claim summary took the process to 800 MB. Lines are gathered into 64 KiB writes.
 */
class SyncOutput {
  /** @param {number} fd */
  constructor(fd) {
    this.fd = fd;
    /** @type {string[]} */
    this.lines = [];
    this.size = 0;
  }

  /** @param {string} line */
  line(line) {
    this.lines.push(line, '\n');
    this.size += line.length + 1;
    if (this.size >= 1 << 16) this.flush();
  }

  flush() {
    if (!this.lines.length) return;
    const bytes = Buffer.from(this.lines.join(''), 'utf8');
    this.lines = [];
    this.size = 0;
    writeAll(this.fd, bytes);
  }
}

const stdout = new SyncOutput(1);

/** @param {string} line */
function out(line) {
  stdout.line(line);
}

/**
 * Verification records held in a temporary file until the run's exit code is known
 * (every --json line carries it, SPEC 7), so the records of several bundles are never all
 * in memory: each is written in pieces (``recordPieces``) with the placeholder 9, whose
 * digit is set when the run ends.
 */
class RecordSpool {
  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'verify-bundle-'));
    this.fd = openSync(join(this.dir, 'records'), 'w+', 0o600);
    this.size = 0;
    /** @type {number[]} */
    this.marks = [];
  }

  /** @param {string} text */
  write(text) {
    const bytes = Buffer.from(text, 'utf8');
    let done = 0;
    while (done < bytes.length) done += writeSync(this.fd, bytes, done, bytes.length - done, this.size + done);
    this.size += bytes.length;
  }

  /** @param {Record<string, any>} record */
  add(record) {
    const mark = '"exit_code":9,"claims":[';
    let first = true;
    for (const piece of recordPieces({ ...record, exit_code: 9 })) {
      if (first) {
        const at = piece.lastIndexOf(mark);
        if (at < 0) throw new Error('the exit code stands just before the claims');
        this.marks.push(this.size + Buffer.byteLength(piece.slice(0, at + '"exit_code":'.length), 'utf8'));
        first = false;
      }
      this.write(piece);
    }
    this.write('\n');
  }

  /** Every record, with ``code`` (one digit), on stdout. @param {number} code */
  emit(code) {
    try {
      stdout.flush();
      for (const mark of this.marks) writeSync(this.fd, String(code), mark);
      const buffer = Buffer.alloc(1 << 20);
      for (let at = 0; at < this.size; ) {
        const n = readSync(this.fd, buffer, 0, buffer.length, at);
        if (n === 0) break;
        writeAll(1, buffer.subarray(0, n));
        at += n;
      }
    } finally {
      closeSync(this.fd);
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Bytes to a file descriptor, synchronously: a pipe's writes wait for its reader rather
 * than queue the bytes in memory (a descriptor left non-blocking by whoever started the
 * command answers EAGAIN: the write is tried again 5 ms later, not in a busy loop).
 * @param {number} fd @param {Uint8Array} bytes
 */
function writeAll(fd, bytes) {
  let done = 0;
  while (done < bytes.length) {
    try {
      done += writeSync(fd, bytes, done, bytes.length - done);
    } catch (e) {
      const code = /** @type {any} */ (e).code;
      // A reader that closed the pipe early (`| head`) ends the command quietly, as the
      // Python command does (exit 1).
      if (code === 'EPIPE') process.exit(1);
      if (code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 5);
    }
  }
}

/**
 * Standard input to its end (a proof or a signature given as -), refused with
 * ``tooLarge`` past ``cap`` bytes, never reading more than 64 KiB past them.
 * @param {number} cap @param {string} tooLarge
 */
function readStdin(cap, tooLarge) {
  const parts = [];
  let size = 0;
  const buffer = Buffer.alloc(1 << 16);
  for (;;) {
    let n;
    try {
      n = readSync(0, buffer, 0, buffer.length, null);
    } catch (e) {
      if (/** @type {any} */ (e).code === 'EAGAIN') {
        Atomics.wait(pause, 0, 0, 5);
        continue;
      }
      if (/** @type {any} */ (e).code === 'EOF') break;
      throw e;
    }
    if (n === 0) break;
    size += n;
    if (size > cap) throw new Error(tooLarge);
    parts.push(Buffer.from(buffer.subarray(0, n)));
  }
  return Buffer.concat(parts);
}

/** A line on stderr, after whatever stdout holds (the two may share a terminal). @param {string} line */
function err(line) {
  stdout.flush();
  writeAll(2, Buffer.from(line + '\n', 'utf8'));
}

async function verifyCommand(/** @type {string[]} */ argv) {
  const { opts, positional } = parseArgs(argv, {
    '--json': 'flag', '--strict': 'flag', '-q': 'flag', '--quiet': 'flag',
    '--expect-bundle-digest': 'value', '--expect-report-digest': 'value', '--allowed-signers': 'value',
    '--identity': 'value', '--signature': 'value', '--max-bytes': 'value',
  });
  if (opts.help) {
    out(VERIFY_HELP);
    return 0;
  }
  if (!positional.length) throw new UsageError('missing argument BUNDLE');
  const expectBundleDigest = digestOption(opts['--expect-bundle-digest'], '--expect-bundle-digest');
  const expectReportDigest = digestOption(opts['--expect-report-digest'], '--expect-report-digest');
  if ((opts['--identity'] !== undefined || opts['--signature'] !== undefined) && opts['--allowed-signers'] === undefined) {
    throw new UsageError('--identity and --signature need --allowed-signers');
  }
  if (opts['--identity'] === '') throw new UsageError('--identity: empty');
  if (opts['--signature'] === '') throw new UsageError('--signature: an empty path');
  if (opts['--signature'] !== undefined && positional.length > 1) throw new UsageError('--signature takes a single BUNDLE');
  const maxBytes = maxBytesOption(opts['--max-bytes']);
  // The signature file is read first, as the Python command reads it: with both files
  // bad, both name the same one.
  const sidecars = [];
  if (opts['--signature'] === '-') sidecars.push({ name: '<signature>', text: optionFile('-', () => readStdin(MAX_SIDECAR_BYTES, `--signature -: over the ${MAX_SIDECAR_BYTES} bytes a signature may hold`)) });
  else if (opts['--signature'] !== undefined) sidecars.push({ name: opts['--signature'], text: optionFile(opts['--signature'], readSignatureFile) });
  const allowedSigners = opts['--allowed-signers'] !== undefined ? optionFile(opts['--allowed-signers'], readAllowedSigners) : null;
  const json = !!opts['--json'];
  const services = nodeServices();
  const codes = [];
  const totals = { verified: 0, failed: 0, error: 0 };
  const records = json ? new RecordSpool() : null;
  for (const source of positional) {
    /** @type {AsyncIterable<Uint8Array>} */
    let chunks;
    let record;
    try {
      const st = statSync(source);
      if (st.isDirectory()) throw new Error('a directory (this verifier reads .tar.zst archives, not bag directories)');
      // A FIFO or a device would block or never end: refused before it is opened.
      if (!st.isFile()) throw new Error('not a regular file or directory');
      chunks = fileChunks(source);
      record = await verifyBundle(chunks, {
        source, ...services, expectBundleDigest, expectReportDigest, strict: !!opts['--strict'], maxBytes,
        allowedSigners, allowedSignersSource: opts['--allowed-signers'], identity: opts['--identity'] ?? null,
        // Every signature present is checked (SPEC 11.3): a named one in addition.
        sidecars: [...sidecars, ...localSidecars(source).filter((s) => !sameFile(s.name, opts['--signature']))],
        collectGarbage,
      });
    } catch (e) {
      const { errorRecord } = await import('./src/record.mjs');
      const message = e instanceof Error && /** @type {any} */ (e).code ? `${source}: cannot open (${/** @type {any} */ (e).code})` : `${source}: ${/** @type {Error} */ (e).message}`;
      record = errorRecord({ source, expectBundleDigest, expectReportDigest, strict: !!opts['--strict'] }, message, null);
    }
    const code = record.verdict === 'verified' ? 0 : record.verdict === 'failed' ? 1 : 3;
    codes.push(code);
    totals[/** @type {'verified'|'failed'|'error'} */ (record.verdict)]++;
    if (records) records.add({ ...record, input: source });
    else {
      // -q silences notes only; the result is always printed (as `evalbook-bundle verify`).
      for (const line of humanLines(record)) out(line);
      if (positional.length > 1) out('');
    }
    if (record.verdict === 'error') err(`error: ${shownClipped(record.error)}`);
    // This bundle's record and bag go before the next is read: V8 would otherwise let
    // the heap grow by one record of up to 100 MB per bundle before collecting. The
    // collection waits one turn of the event loop: until then the file's closing still
    // holds the last of the bundle, and a collection keeps all of it (75 MB of a 122,000-
    // claim record, measured; three such bundles peaked at 348 MB instead of 265 MB).
    record = null;
    chunks = undefined;
    if (positional.length > 1) {
      await new Promise((resolve) => setImmediate(resolve));
      collectGarbage();
    }
  }
  const code = codes.includes(1) ? 1 : codes.includes(3) ? 3 : 0;
  // With --json, each line once every bundle is checked, with the exit code of the run
  // (SPEC 7: a record's exit_code is the process's), as the Python verifier gives them.
  if (records) records.emit(code);
  if (!json && positional.length > 1) out(`Totals: ${totals.verified} verified, ${totals.failed} failed, ${totals.error} could not be checked`);
  return code;
}

async function checkProofCommand(/** @type {string[]} */ argv) {
  const { opts, positional } = parseArgs(argv, {
    '--json': 'flag', '-q': 'flag', '--quiet': 'flag', '--allowed-signers': 'value', '--identity': 'value', '--expect-bundle-digest': 'value',
  });
  if (opts.help) {
    out(CHECK_PROOF_HELP);
    return 0;
  }
  if (positional.length !== 1) throw new UsageError(positional.length ? 'check-proof takes one PROOF' : 'missing argument PROOF');
  if (opts['--identity'] !== undefined && opts['--allowed-signers'] === undefined) throw new UsageError('--identity needs --allowed-signers');
  if (opts['--identity'] === '') throw new UsageError('--identity: empty');
  const expectBundleDigest = digestOption(opts['--expect-bundle-digest'], '--expect-bundle-digest');
  const allowedSigners = opts['--allowed-signers'] !== undefined ? optionFile(opts['--allowed-signers'], readAllowedSigners) : null;
  const source = positional[0];
  let data;
  try {
    if (source === '-') data = readStdin(64 * 1024 * 1024, 'over 64 MiB, larger than any proof');
    else {
      const st = statSync(source);
      if (!st.isFile()) throw new Error('not a regular file');
      if (st.size > 64 * 1024 * 1024) throw new Error('over 64 MiB, larger than any proof');
      data = readFileSync(source);
    }
  } catch (e) {
    throw new InputError(`${source}: cannot read (${/** @type {any} */ (e).code ?? /** @type {Error} */ (e).message})`);
  }
  const result = await checkProof(new Uint8Array(data), {
    source, ...nodeServices(), allowedSigners, allowedSignersSource: opts['--allowed-signers'], identity: opts['--identity'] ?? null, expectBundleDigest,
  });
  // A proof that cannot be read is an error as any other (evalbook.error.v1 with --json);
  // one that is read and not proven is a result with --json, else a line on stderr, as
  // the Python command gives them; stdout holds only what was proven.
  if (result.exit_code === 3) throw new InputError(result.error);
  // A proven case is printed as the Python command prints it; a failing command's JSON
  // carries its exit code and input (SPEC 7).
  if (opts['--json']) {
    const { exit_code: code, ...proven } = result;
    out(JSON.stringify(result.proven ? proven : { ...result, input: source }));
  }
  else if (result.proven) for (const line of proofLines(result)) out(line);
  if (!result.proven) err(`error: ${shown(result.reason)}`);
  return result.exit_code;
}

/**
 * A command that fails before any result: one line on stderr naming the option or file
 * and the rule, and with --json one evalbook.error.v1 object on stdout (SPEC 7); exit 2
 * for a badly written option, 3 for an input that cannot be read (SPEC 8).
 * @param {string} command @param {string[]} argv @param {unknown} e
 */
function failure(command, argv, e) {
  const code = e instanceof UsageError ? 2 : 3;
  const message = e instanceof Error ? e.message : String(e);
  const end = argv.indexOf('--');
  const options = end < 0 ? argv : argv.slice(0, end);
  if (options.includes('--json')) {
    const named = e instanceof Error ? /** @type {any} */ (e).input : undefined;
    const input = named ?? argv.find((a, i) => !a.startsWith('-') && (i === 0 || !VALUE_OPTIONS.has(argv[i - 1]))) ?? null;
    out(JSON.stringify({ schema: 'evalbook.error.v1', command, error: message, exit_code: code, input }));
  }
  err(`error: ${shown(message)}${code === 2 ? ' (see --help)' : ''}`);
  return code;
}

const VALUE_OPTIONS = new Set(['--expect-bundle-digest', '--expect-report-digest', '--allowed-signers', '--identity', '--signature', '--max-bytes']);


async function main() {
  const argv = process.argv.slice(2);
  const command = argv[0] === 'check-proof' ? 'check-proof' : 'verify';
  const rest = argv[0] === 'check-proof' || argv[0] === 'verify' ? argv.slice(1) : argv;
  try {
    return command === 'check-proof' ? await checkProofCommand(rest) : await verifyCommand(rest);
  } catch (e) {
    return failure(command, rest, e);
  }
}

main().then((code) => {
  stdout.flush();
  process.exitCode = code;
});
