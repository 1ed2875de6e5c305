// @ts-check
/**
 * The strict tar reader of SPEC 5: POSIX ustar with pax extended headers, as the
 * exporter writes it, and nothing else. Every member is a regular file or a directory
 * inside the one top directory, named by the rules of names.mjs, unique after NFC and
 * case folding, after its parent; headers carry a correct checksum in the ustar
 * spelling; pax records are well formed, known, at most 64 KiB, and agree with the
 * header; the archive ends with two zero blocks and zero padding to the record.
 */
import { InputError } from './errors.mjs';
import { folded, nameProblem, MAX_NAME_BYTES } from './names.mjs';

export const BLOCK = 512;
export const RECORD = 20 * BLOCK;
export const MAX_PAX_BYTES = 64 * 1024;
export const MAX_MEMBERS = 2 ** 16;
// The names of all members together (UTF-8 bytes, without a directory's trailing '/'):
// the manifest lists every data/ file's name and is one document of at most 32 MiB, so no
// bundle export writes holds more; the exporter refuses the same (docs/format.md).
export const MAX_NAMES_TOTAL_BYTES = 32 * 1024 * 1024;
const CHUNK = 1024 * 1024;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const LATIN = new TextDecoder('latin1');

const REJECTED = /** @type {Record<string, string>} */ ({
  1: 'hard link',
  2: 'symbolic link',
  3: 'character device',
  4: 'block device',
  6: 'FIFO',
  7: 'contiguous file',
  g: 'pax global header',
  L: 'GNU long name record',
  K: 'GNU long link name record',
  S: 'GNU sparse member',
  D: 'GNU dumpdir',
  M: 'GNU multi-volume continuation',
  N: 'GNU old long name',
  V: 'GNU volume header',
});
const PAX_USED = new Set(['path', 'mtime', 'size']);
const PAX_IGNORED = new Set(['atime', 'ctime', 'comment']);

/**
 * @typedef {{path: string, isDir: boolean, size: number, mtime: number, mode: number}} Member
 * @typedef {AsyncIterable<Uint8Array> & {whole(): Uint8Array | null}} Content
 *   yields chunks each valid until the next is asked for; `whole()`, asked before any
 *   chunk, gives all of a member of at most 1 MiB at once (a view valid until the next
 *   chunk is asked for) when the reader already holds it, with no await, and then
 *   nothing is left to iterate; else null (iterate). Most members are small, and an
 *   async iteration costs more than hashing a few KiB.
 * @typedef {(member: Member, content: Content) => Promise<void> | undefined} Visit
 *   a visitor with nothing to wait for returns undefined, not a promise
 */

/** @param {Uint8Array} b */
function showBytes(b) {
  try {
    return JSON.stringify(UTF8.decode(b));
  } catch {
    return JSON.stringify(LATIN.decode(b));
  }
}

/** The bytes before the first NUL, or null if anything but NULs follows it. @param {Uint8Array} f */
function cstring(f) {
  const nul = f.indexOf(0);
  if (nul < 0) return f;
  for (let i = nul; i < f.length; i++) if (f[i] !== 0) return null;
  return f.subarray(0, nul);
}

/**
 * The ustar checksum of a header block: its bytes summed, the checksum field as spaces.
 * (A small function of its own, so it is optimised apart from the reader's loop.)
 * @param {Uint8Array} block
 */
function headerSum(block) {
  let sum = 8 * 0x20;
  for (let i = 0; i < 148; i++) sum += block[i];
  for (let i = 156; i < BLOCK; i++) sum += block[i];
  return sum;
}

/** @param {Uint8Array} b */
function isZero(b) {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

/**
 * @typedef {(offset: number, rule: string) => InputError} AtError
 * @typedef {(name: string, offset: number, rule: string) => InputError} MemberError
 */

/**
 * An octal number field of a header.
 * @param {Uint8Array} block @param {number} s @param {number} e @param {string} field
 * @param {number} hdr @param {AtError} at
 */
function octal(block, s, e, field, hdr, at) {
  if (block[s] & 0x80) throw at(hdr, `base-256 ${field} field (not allowed)`);
  let end = e;
  while (end > s && (block[end - 1] === 0 || block[end - 1] === 0x20)) end--;
  let start = s;
  while (start < end && block[start] === 0x20) start++;
  if (start === end) throw at(hdr, `${field} field is not an octal number`);
  let v = 0;
  for (let i = start; i < end; i++) {
    const d = block[i] - 0x30;
    if (d < 0 || d > 7) throw at(hdr, `${field} field is not an octal number`);
    v = v * 8 + d;
  }
  if (!Number.isSafeInteger(v)) throw at(hdr, `${field} field too large`);
  return v;
}

/**
 * The fields of a header block that is not a zero block, each checked: the checksum and
 * its ustar spelling, the type, the magic, the name fields, no link name, the numbers.
 * (Synchronous and apart from the reader's loop, which stays small.)
 * @param {Uint8Array} block @param {number} hdr @param {AtError} at @param {MemberError} memberError
 */
function parseHeader(block, hdr, at, memberError) {
  // checksum
  const stored = octal(block, 148, 156, 'checksum', hdr, at);
  const sum = headerSum(block);
  if (stored !== sum) throw at(hdr, `bad header checksum (stored ${stored}, computed ${sum})`);
  const spelled = sum.toString(8).padStart(6, '0');
  let spelledOk = block[154] === 0 && block[155] === 0x20 && spelled.length === 6;
  for (let i = 0; spelledOk && i < 6; i++) spelledOk = block[148 + i] === spelled.charCodeAt(i);
  if (!spelledOk) throw at(hdr, "checksum field not in the ustar form '%06o\\0 '");
  const typeflag = String.fromCharCode(block[156]);
  const nameField = cstring(block.subarray(0, 100));
  const prefixField = cstring(block.subarray(345, 500));
  const shown = () =>
    nameField && prefixField && prefixField.length ? showBytes(joinName(prefixField, nameField)) : showBytes(nameField ?? block.subarray(0, 100));
  if (REJECTED[typeflag]) throw memberError(shown(), hdr, `${REJECTED[typeflag]} (type '${typeflag}') not allowed`);
  if (typeflag !== '0' && typeflag !== '\0' && typeflag !== '5' && typeflag !== 'x') throw memberError(shown(), hdr, `unknown member type ${JSON.stringify(typeflag)}`);
  if (!(block[257] === 0x75 && block[258] === 0x73 && block[259] === 0x74 && block[260] === 0x61 && block[261] === 0x72 && block[262] === 0 && block[263] === 0x30 && block[264] === 0x30)) {
    const magic = LATIN.decode(block.subarray(257, 265));
    if (magic === 'ustar  \0') throw memberError(shown(), hdr, 'a GNU tar header, not a POSIX ustar header: not a bundle');
    throw memberError(shown(), hdr, `not a POSIX ustar header (magic ${JSON.stringify(magic)})`);
  }
  if (nameField === null || prefixField === null) throw memberError(shown(), hdr, 'bytes after the NUL in the name field');
  if (typeflag !== 'x' && !isZero(block.subarray(157, 257))) throw memberError(shown(), hdr, 'link name set on a non-link member');
  const size = octal(block, 124, 136, 'size', hdr, at);
  const mtime = octal(block, 136, 148, 'mtime', hdr, at);
  const mode = octal(block, 100, 108, 'mode', hdr, at);
  octal(block, 108, 116, 'uid', hdr, at);
  octal(block, 116, 124, 'gid', hdr, at);
  const rawName = prefixField.length ? joinName(prefixField, nameField) : nameField;

  return { typeflag, size, mtime, mode, rawName };
}

/**
 * The member names of one archive, each admitted by the rules of SPEC 5 in turn: UTF-8,
 * no NUL, the length caps, names.mjs's rules, unique after NFC and case folding, at most
 * maxMembers, the names' total, inside the one top directory, after its parent.
 */
class Names {
  /** @param {number} maxMembers @param {MemberError} memberError */
  constructor(maxMembers, memberError) {
    this.maxMembers = maxMembers;
    this.memberError = memberError;
    /** @type {Map<string, string>} */
    this.foldedNames = new Map();
    this.namesTotal = 0;
    /** @type {Set<string>} */
    this.dirs = new Set();
    /** @type {string|null} */
    this.top = null;
  }

  /**
   * The member's name (a directory's without its trailing '/'), or InputError.
   * @param {Uint8Array} nameBytes @param {boolean} isDir @param {number} hdr
   */
  admit(nameBytes, isDir, hdr) {
    const { memberError, foldedNames, maxMembers, dirs } = this;
    if (nameBytes.includes(0)) throw memberError(showBytes(nameBytes), hdr, 'NUL byte in name');
    let name;
    try {
      name = UTF8.decode(nameBytes);
    } catch {
      throw memberError(showBytes(nameBytes), hdr, 'name is not UTF-8');
    }
    const fail = (/** @type {string} */ rule) => memberError(JSON.stringify(name), hdr, rule);
    if (nameBytes.length > MAX_NAME_BYTES) throw fail(`name longer than ${MAX_NAME_BYTES} bytes`);
    if (name.endsWith('/')) {
      if (!isDir) throw fail("regular file name ends with '/'");
      name = name.slice(0, -1);
    }
    const problem = nameProblem(name);
    if (problem !== null) throw fail(problem);
    const key = folded(name);
    const seen = foldedNames.get(key);
    if (seen !== undefined) {
      if (seen === name) throw fail('duplicate name');
      throw fail(`collides with ${JSON.stringify(seen)} after NFC and case folding`);
    }
    if (foldedNames.size >= maxMembers) throw fail(`more than max_members=${maxMembers} members (the most a bundle holds, docs/format.md)`);
    const nameSize = nameBytes.length - (isDir && nameBytes[nameBytes.length - 1] === 0x2f ? 1 : 0);
    if (this.namesTotal + nameSize > MAX_NAMES_TOTAL_BYTES) {
      throw fail(`member names over ${MAX_NAMES_TOTAL_BYTES} bytes in all (the most a bundle holds, docs/format.md)`);
    }
    this.namesTotal += nameSize;
    const top = this.top;
    if (top === null) {
      if (!isDir || name.includes('/')) throw fail('the first member must be the single top-level directory');
      this.top = name;
    } else {
      if (!name.startsWith(top + '/')) throw fail(`outside the top-level directory ${JSON.stringify(top)}`);
      const parent = name.slice(0, name.lastIndexOf('/'));
      if (!dirs.has(parent)) throw fail(`parent directory ${JSON.stringify(parent)} has not appeared before it`);
    }
    foldedNames.set(key, name);
    if (isDir) dirs.add(name);
    return name;
  }
}

/**
 * Read every member of a decompressed tar stream, calling `visit` for each regular
 * file and directory; content a visitor leaves unread is skipped.
 * @param {import('./bytereader.mjs').ByteReader} reader
 * @param {{source: string, maxBytes: number, maxMembers?: number}} opts
 * @param {Visit} visit
 */
export async function readTar(reader, opts, visit) {
  const { source, maxBytes } = opts;
  const maxMembers = opts.maxMembers ?? MAX_MEMBERS;
  const at = (/** @type {number} */ offset, /** @type {string} */ rule) =>
    new InputError(`${source}: tar header at offset ${offset}: ${rule}`);
  const memberError = (/** @type {string} */ name, /** @type {number} */ offset, /** @type {string} */ rule) =>
    new InputError(`${source}: member ${name} (header at offset ${offset}): ${rule}`);

  let offset = 0;
  /**
   * `n` bytes as a view valid until the next read, when the reader holds them already
   * and they are within max_bytes; else null, nothing consumed (then `read`).
   * @param {number} n
   */
  const readNow = (n) => {
    if (offset + n > maxBytes) return null;
    const data = reader.viewNow(n);
    if (data !== null) offset += n;
    return data;
  };
  /**
   * `n` bytes; with `view`, a view valid until the next read (what is checked at once
   * and not kept: a header block, padding), else bytes of their own.
   * @param {number} n @param {string} what @param {boolean} [view]
   */
  const read = async (n, what, view = false) => {
    if (offset + n > maxBytes) {
      throw new InputError(`${source}: tar stream at offset ${offset}: more than max_bytes=${maxBytes} bytes (the --max-bytes cap; raise it to read a larger bundle)`);
    }
    const data = view ? await reader.readView(n) : await reader.read(n);
    if (data.length < n) {
      throw new InputError(`${source}: truncated tar: stream ended at offset ${offset + data.length} ${data.length === 0 && what === 'a header' ? 'without an end-of-archive marker' : `inside ${what}`}`);
    }
    offset += n;
    return data;
  };
  /** @param {Uint8Array} padding @param {string|null} name @param {number} hdr */
  const checkPadding = (padding, name, hdr) => {
    if (!isZero(padding)) {
      const rule = 'nonzero bytes in the block padding';
      throw name === null ? at(hdr, rule) : memberError(JSON.stringify(name), hdr, rule);
    }
  };

  const names = new Names(maxMembers, memberError);
  /** @type {{offset: number, path: Uint8Array|null, size: number|null, mtime: number|null}|null} */
  let pax = null;

  for (;;) {
    const hdr = offset;
    // A view: the header is checked and its name decoded before anything else is read.
    const block = readNow(BLOCK) ?? (await read(BLOCK, 'a header', true));
    if (isZero(block)) {
      if (pax !== null) throw at(pax.offset, 'pax header not followed by a member');
      const second = await read(BLOCK, 'the end-of-archive marker');
      if (!isZero(second)) throw at(hdr, 'zero block not followed by a second zero block (data after end marker?)');
      const pad = (RECORD - (offset % RECORD)) % RECORD;
      if (pad) {
        const padding = await read(pad, 'the record padding after the end-of-archive marker');
        if (!isZero(padding)) throw new InputError(`${source}: tar stream at offset ${offset - pad + padding.findIndex((b) => b !== 0)}: data after the end-of-archive marker`);
      }
      const more = await reader.readSome(1);
      if (more.length) throw new InputError(`${source}: tar stream at offset ${offset}: data after the end-of-archive marker and its record padding`);
      return;
    }
    const { typeflag, size, mtime, mode, rawName } = parseHeader(block, hdr, at, memberError);

    if (typeflag === 'x') {
      if (pax !== null) throw at(hdr, 'pax header follows another pax header');
      if (size > MAX_PAX_BYTES) throw at(hdr, `oversize pax record (${size} bytes, limit ${MAX_PAX_BYTES})`);
      const data = await read(size, 'a pax header');
      const pad = padLength(size);
      if (pad) checkPadding(readNow(pad) ?? (await read(pad, 'the block padding', true)), null, hdr);
      pax = parsePax(data, hdr, at);
      continue;
    }

    let nameBytes = rawName;
    let mt = mtime;
    if (pax !== null) {
      if (pax.path !== null) nameBytes = pax.path;
      if (pax.size !== null && pax.size !== size) {
        throw memberError(showBytes(nameBytes), hdr, `pax size ${pax.size} disagrees with header size ${size}`);
      }
      if (pax.mtime !== null) mt = pax.mtime;
    }
    pax = null;
    const isDir = typeflag === '5';
    if (isDir && size) throw memberError(showBytes(nameBytes), hdr, `directory with ${size} bytes of data`);

    const name = names.admit(nameBytes, isDir, hdr);
    if (hdr + BLOCK + size + padLength(size) > maxBytes) {
      throw memberError(JSON.stringify(name), hdr, `size ${size} goes past max_bytes=${maxBytes} (the --max-bytes cap; raise it to read a larger bundle)`);
    }
    const member = { path: name, isDir, size, mtime: mt, mode };
    if (isDir) {
      const waiting = visit(member, NO_CONTENT);
      if (waiting !== undefined) await waiting;
      continue;
    }
    let remaining = size;
    const memberName = name;
    let live = true;
    /** @type {Content} */
    const content = {
      whole() {
        if (!live || remaining !== size || size > CHUNK) return null;
        const data = reader.viewNow(size);
        if (data === null) return null;
        remaining = 0;
        offset += size;
        return data;
      },
      async *[Symbol.asyncIterator]() {
        while (remaining > 0) {
          if (!live) throw new Error(`content of ${memberName} read after advancing`);
          // Whatever the decompressor has ready, without copying (a view valid until
          // the next chunk is asked for): the bag reader's decisions wait for a
          // member's first bytes, so chunking changes nothing.
          const data = await reader.readSome(Math.min(remaining, CHUNK));
          if (data.length === 0) {
            throw new InputError(`${source}: truncated tar: stream ended at offset ${offset} inside member ${JSON.stringify(memberName)} (header at offset ${hdr})`);
          }
          remaining -= data.length;
          offset += data.length;
          yield data;
        }
      },
    };
    const waiting = visit(member, content);
    if (waiting !== undefined) await waiting;
    live = false;
    while (remaining > 0) {
      const data = reader.someNow(Math.min(remaining, CHUNK)) ?? (await reader.readSome(Math.min(remaining, CHUNK)));
      if (data.length === 0) {
        throw new InputError(`${source}: truncated tar: stream ended at offset ${offset} inside member ${JSON.stringify(memberName)} (header at offset ${hdr})`);
      }
      remaining -= data.length;
      offset += data.length;
    }
    const pad = padLength(size);
    if (pad) checkPadding(readNow(pad) ?? (await read(pad, 'the block padding', true)), name, hdr);
  }
}

/** The zero bytes after `size` bytes of data, to the next block. @param {number} size */
function padLength(size) {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}

/** @type {Content} */
const NO_CONTENT = {
  whole: () => null,
  async *[Symbol.asyncIterator]() {},
};

/** @param {Uint8Array} prefix @param {Uint8Array} name */
function joinName(prefix, name) {
  const out = new Uint8Array(prefix.length + 1 + name.length);
  out.set(prefix, 0);
  out[prefix.length] = 0x2f;
  out.set(name, prefix.length + 1);
  return out;
}

/**
 * @param {Uint8Array} data
 * @param {number} hdr
 * @param {(offset: number, rule: string) => InputError} at
 */
function parsePax(data, hdr, at) {
  /** @type {Map<string, Uint8Array>} */
  const records = new Map();
  let pos = 0;
  while (pos < data.length) {
    let space = -1;
    for (let i = pos; i < Math.min(data.length, pos + 21); i++) {
      if (data[i] === 0x20) {
        space = i;
        break;
      }
    }
    const lengthField = space > pos ? LATIN.decode(data.subarray(pos, space)) : '';
    if (!/^[1-9][0-9]*$/.test(lengthField)) throw at(hdr, `malformed pax record at byte ${pos} of the pax header`);
    const end = pos + Number(lengthField);
    if (end > data.length || end <= space + 1 || data[end - 1] !== 0x0a) {
      throw at(hdr, `pax record length does not match at byte ${pos} of the pax header`);
    }
    const body = data.subarray(space + 1, end - 1);
    const eq = body.indexOf(0x3d);
    let key = '';
    if (eq > 0) {
      try {
        key = UTF8.decode(body.subarray(0, eq));
      } catch {
        key = '';
      }
    }
    if (eq < 0 || !key) throw at(hdr, `malformed pax record at byte ${pos} of the pax header`);
    if (records.has(key)) throw at(hdr, `duplicate pax key ${JSON.stringify(key)}`);
    records.set(key, body.subarray(eq + 1));
    pos = end;
  }
  for (const key of records.keys()) {
    if (key.startsWith('GNU.sparse.')) throw at(hdr, `sparse member (pax key ${JSON.stringify(key)}) not allowed`);
    if (!PAX_USED.has(key) && !PAX_IGNORED.has(key)) throw at(hdr, `unsupported pax key ${JSON.stringify(key)}`);
  }
  for (const key of PAX_USED) {
    const v = records.get(key);
    if (v !== undefined && !v.length) throw at(hdr, `empty pax ${key} record`);
  }
  let size = null;
  const sizeRaw = records.get('size');
  if (sizeRaw !== undefined) {
    const t = LATIN.decode(sizeRaw);
    if (!/^[0-9]+$/.test(t)) throw at(hdr, 'pax size is not a decimal number');
    size = Number(t);
    if (!Number.isSafeInteger(size)) throw at(hdr, 'pax size too large');
  }
  let mtime = null;
  const mtimeRaw = records.get('mtime');
  if (mtimeRaw !== undefined) {
    const t = LATIN.decode(mtimeRaw);
    if (!/^[0-9]+(\.[0-9]+)?$/.test(t)) throw at(hdr, 'pax mtime is not a number');
    mtime = Number(t.split('.')[0]);
  }
  return { offset: hdr, path: records.get('path') ?? null, size, mtime };
}
