// @ts-check
/**
 * Exact reads over an async iterable of byte chunks, where a chunk may be valid only
 * until the next is asked for (the zstd layer's pieces): `read` returns bytes of its
 * own, `readView` and `readSome` a view valid until the next read.
 */

export class ByteReader {
  /** @param {AsyncIterable<Uint8Array>} chunks */
  constructor(chunks) {
    this.it = chunks[Symbol.asyncIterator]();
    /** @type {Uint8Array} */
    this.buf = new Uint8Array(0);
    this.pos = 0;
    this.ended = false;
    /** bytes handed out so far */
    this.offset = 0;
  }

  async fill() {
    while (this.pos >= this.buf.length && !this.ended) {
      const r = await this.it.next();
      if (r.done) this.ended = true;
      else {
        this.buf = r.value;
        this.pos = 0;
      }
    }
    return this.pos < this.buf.length;
  }

  /**
   * Up to `n` bytes (fewer only at the end of the stream), as one array of its own.
   * @param {number} n
   */
  async read(n) {
    if (!(await this.fill())) return new Uint8Array(0);
    if (this.buf.length - this.pos >= n) {
      const out = this.buf.slice(this.pos, this.pos + n);
      this.pos += n;
      this.offset += n;
      return out;
    }
    const out = new Uint8Array(n);
    let got = 0;
    while (got < n && (await this.fill())) {
      const take = Math.min(n - got, this.buf.length - this.pos);
      out.set(this.buf.subarray(this.pos, this.pos + take), got);
      this.pos += take;
      got += take;
    }
    this.offset += got;
    return got === n ? out : out.subarray(0, got);
  }

  /**
   * Up to `n` bytes (fewer only at the end of the stream), as a view valid until the
   * next read when they lie in the chunk at hand (a header block, a padding), else as
   * an array of their own.
   * @param {number} n
   */
  async readView(n) {
    if (!(await this.fill())) return new Uint8Array(0);
    if (this.buf.length - this.pos >= n) {
      const out = this.buf.subarray(this.pos, this.pos + n);
      this.pos += n;
      this.offset += n;
      return out;
    }
    return this.read(n);
  }

  /**
   * Up to `n` bytes, whatever is buffered (at least one unless at the end), as a view
   * valid until the next read.
   * @param {number} n
   */
  async readSome(n) {
    if (!(await this.fill())) return new Uint8Array(0);
    const take = Math.min(n, this.buf.length - this.pos);
    const out = this.buf.subarray(this.pos, this.pos + take);
    this.pos += take;
    this.offset += take;
    return out;
  }

  /**
   * `n` bytes as a view valid until the next read, when the chunk at hand holds them
   * all; else null, and nothing is consumed (then `readView` waits for them). An await
   * costs more than checking a header block, so a reader of many small members asks
   * here first.
   * @param {number} n
   * @returns {Uint8Array | null}
   */
  viewNow(n) {
    if (this.buf.length - this.pos < n) return null;
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    this.offset += n;
    return out;
  }

  /**
   * Up to `n` bytes of the chunk at hand (at least one), as a view valid until the next
   * read; null, and nothing consumed, when the chunk at hand is used up (then `readSome`).
   * @param {number} n
   * @returns {Uint8Array | null}
   */
  someNow(n) {
    if (this.pos >= this.buf.length || n <= 0) return null;
    const take = Math.min(n, this.buf.length - this.pos);
    const out = this.buf.subarray(this.pos, this.pos + take);
    this.pos += take;
    this.offset += take;
    return out;
  }

  async close() {
    if (this.it.return) await this.it.return();
  }
}
