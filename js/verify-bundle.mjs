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
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { verifyBundle, DEFAULT_MAX_BYTES } from './src/verify.mjs';
import { checkProof, proofLines } from './src/proof.mjs';
import { humanLines } from './src/record.mjs';
import { localSidecars, nodeServices } from './src/node.mjs';
import { parseAllowedSigners } from './src/sshsig.mjs';
import { MAX_SIDECAR_BYTES } from './src/signatures.mjs';
import { shown } from './src/textsafe.mjs';
import { TrustError, UsageError } from './src/errors.mjs';

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const USAGE = `usage: node js/verify-bundle.mjs BUNDLE... [--json] [--strict] [-q] [--expect-bundle-digest D]
       [--expect-report-digest D] [--allowed-signers F] [--identity ID] [--signature SIG] [--max-bytes N]
       node js/verify-bundle.mjs check-proof PROOF [--json] [-q] [--allowed-signers F [--identity ID]]
       [--expect-bundle-digest D]`;

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

/** @param {string} path @param {string} option */
function readSmallFile(path, option) {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    throw new UsageError(`${option} ${path}: cannot read (${/** @type {any} */ (e).code ?? e})`);
  }
  if (!st.isFile()) throw new UsageError(`${option} ${path}: not a regular file`);
  if (st.size > 1024 * 1024) throw new UsageError(`${option} ${path}: over 1 MiB`);
  return readFileSync(path);
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

/** @param {string} line */
function out(line) {
  process.stdout.write(line + '\n');
}

/** @param {string} line */
function err(line) {
  process.stderr.write(line + '\n');
}

async function verifyCommand(/** @type {string[]} */ argv) {
  const { opts, positional } = parseArgs(argv, {
    '--json': 'flag', '--strict': 'flag', '-q': 'flag', '--quiet': 'flag',
    '--expect-bundle-digest': 'value', '--expect-report-digest': 'value', '--allowed-signers': 'value',
    '--identity': 'value', '--signature': 'value', '--max-bytes': 'value',
  });
  if (opts.help) {
    out(USAGE);
    return 0;
  }
  if (!positional.length) throw new UsageError('missing argument BUNDLE');
  const expectBundleDigest = digestOption(opts['--expect-bundle-digest'], '--expect-bundle-digest');
  const expectReportDigest = digestOption(opts['--expect-report-digest'], '--expect-report-digest');
  if ((opts['--identity'] !== undefined) && opts['--allowed-signers'] === undefined) {
    throw new UsageError('--identity needs --allowed-signers');
  }
  if (opts['--signature'] !== undefined && positional.length > 1) throw new UsageError('--signature takes a single BUNDLE');
  let maxBytes = DEFAULT_MAX_BYTES;
  if (opts['--max-bytes'] !== undefined) {
    if (!/^[0-9]{1,16}$/.test(opts['--max-bytes']) || Number(opts['--max-bytes']) < 1) throw new UsageError(`--max-bytes ${JSON.stringify(opts['--max-bytes'])}: not a positive whole number`);
    maxBytes = Number(opts['--max-bytes']);
  }
  let allowedSigners = null;
  if (opts['--allowed-signers'] !== undefined) {
    const data = readSmallFile(opts['--allowed-signers'], '--allowed-signers');
    allowedSigners = new TextDecoder('utf-8', { fatal: false }).decode(data);
    try {
      parseAllowedSigners(allowedSigners, opts['--allowed-signers']);
    } catch (e) {
      if (e instanceof TrustError) throw new UsageError(`--allowed-signers ${e.message}`);
      throw e;
    }
  }
  const sidecars = [];
  if (opts['--signature'] !== undefined) sidecars.push({ name: opts['--signature'], text: readSignatureFile(opts['--signature']) });
  const json = !!opts['--json'];
  const quiet = !!(opts['-q'] || opts['--quiet']);
  const services = nodeServices();
  const codes = [];
  const totals = { verified: 0, failed: 0, error: 0 };
  for (const source of positional) {
    /** @type {AsyncIterable<Uint8Array>} */
    let chunks;
    let record;
    try {
      const st = statSync(source);
      if (st.isDirectory()) throw new Error('a directory (this verifier reads .tar.zst archives, not bag directories)');
      chunks = createReadStream(source, { highWaterMark: 1 << 20 });
      record = await verifyBundle(chunks, {
        source, ...services, expectBundleDigest, expectReportDigest, strict: !!opts['--strict'], maxBytes,
        allowedSigners, allowedSignersSource: opts['--allowed-signers'], identity: opts['--identity'] ?? null,
        // Every signature present is checked (SPEC 11.3): the one named, else each beside the archive.
        sidecars: opts['--signature'] !== undefined ? sidecars : localSidecars(source),
      });
    } catch (e) {
      const { errorRecord } = await import('./src/record.mjs');
      const message = e instanceof Error && /** @type {any} */ (e).code ? `${source}: cannot open (${/** @type {any} */ (e).code})` : `${source}: ${/** @type {Error} */ (e).message}`;
      record = errorRecord({ source, expectBundleDigest, expectReportDigest, strict: !!opts['--strict'] }, message, null);
    }
    const code = record.verdict === 'verified' ? 0 : record.verdict === 'failed' ? 1 : 3;
    codes.push(code);
    totals[/** @type {'verified'|'failed'|'error'} */ (record.verdict)]++;
    if (json) out(JSON.stringify({ ...record, exit_code: code, input: source }));
    else if (!quiet) {
      for (const line of humanLines(record)) out(line);
      if (positional.length > 1) out('');
    } else out(`${record.verdict.toUpperCase()}  ${shown(source)}`);
    if (record.verdict === 'error') err(`error: ${shown(record.error)}`);
  }
  if (!json && positional.length > 1) out(`Totals: ${totals.verified} verified, ${totals.failed} failed, ${totals.error} could not be checked`);
  return codes.includes(1) ? 1 : codes.includes(3) ? 3 : 0;
}

async function checkProofCommand(/** @type {string[]} */ argv) {
  const { opts, positional } = parseArgs(argv, {
    '--json': 'flag', '-q': 'flag', '--quiet': 'flag', '--allowed-signers': 'value', '--identity': 'value', '--expect-bundle-digest': 'value',
  });
  if (opts.help) {
    out(USAGE);
    return 0;
  }
  if (positional.length !== 1) throw new UsageError(positional.length ? 'check-proof takes one PROOF' : 'missing argument PROOF');
  if (opts['--identity'] !== undefined && opts['--allowed-signers'] === undefined) throw new UsageError('--identity needs --allowed-signers');
  const expectBundleDigest = digestOption(opts['--expect-bundle-digest'], '--expect-bundle-digest');
  let allowedSigners = null;
  if (opts['--allowed-signers'] !== undefined) {
    allowedSigners = new TextDecoder().decode(readSmallFile(opts['--allowed-signers'], '--allowed-signers'));
    try {
      parseAllowedSigners(allowedSigners, opts['--allowed-signers']);
    } catch (e) {
      if (e instanceof TrustError) throw new UsageError(`--allowed-signers ${e.message}`);
      throw e;
    }
  }
  const source = positional[0];
  let data;
  try {
    const st = statSync(source);
    if (!st.isFile()) throw new Error('not a regular file');
    if (st.size > 64 * 1024 * 1024) throw new Error('over 64 MiB, larger than any proof');
    data = readFileSync(source);
  } catch (e) {
    const message = `${source}: cannot read (${/** @type {any} */ (e).code ?? /** @type {Error} */ (e).message})`;
    if (opts['--json']) out(JSON.stringify({ schema: 'evalbook.proof_check.v1', input: source, exit_code: 3, proven: false, error: message }));
    err(`error: ${shown(message)}`);
    return 3;
  }
  const result = await checkProof(new Uint8Array(data), {
    source, ...nodeServices(), allowedSigners, allowedSignersSource: opts['--allowed-signers'], identity: opts['--identity'] ?? null, expectBundleDigest,
  });
  if (opts['--json']) out(JSON.stringify({ ...result, input: source }));
  else if (!(opts['-q'] || opts['--quiet'])) for (const line of proofLines(result)) out(line);
  if (result.exit_code === 3) err(`error: ${shown(result.error)}`);
  return result.exit_code;
}

async function main() {
  const argv = process.argv.slice(2);
  try {
    if (argv[0] === 'check-proof') return await checkProofCommand(argv.slice(1));
    if (argv[0] === 'verify') return await verifyCommand(argv.slice(1));
    return await verifyCommand(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      err(USAGE);
      err(`error: ${shown(e.message)}`);
      return 2;
    }
    err(`error: ${shown(/** @type {Error} */ (e).message)}`);
    return 3;
  }
}

main().then((code) => {
  process.exitCode = code;
});
