/**
 * Counts the Redis commands in a client's byte stream (RESP arrays of bulk strings, as every client
 * library sends them), by command name. Bytes may arrive split anywhere.
 */
export class RespCommandCounter {
  readonly byCommand = new Map<string, number>();
  private pending: Buffer = Buffer.alloc(0);

  get total(): number {
    let sum = 0;
    for (const n of this.byCommand.values()) sum += n;
    return sum;
  }

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let offset = 0;
    for (;;) {
      const parsed = this.parseCommand(offset);
      if (!parsed) break;
      this.byCommand.set(parsed.name, (this.byCommand.get(parsed.name) ?? 0) + 1);
      offset = parsed.end;
    }
    this.pending = this.pending.subarray(offset);
  }

  /** One complete command from `start`, or undefined when more bytes are needed. */
  private parseCommand(start: number): { name: string; end: number } | undefined {
    const header = this.line(start);
    if (!header) return undefined;
    if (this.pending[start] !== 0x2a /* '*' */) throw new Error('not a RESP array: only multibulk requests are counted');
    const count = Number(header.text.slice(1));
    let offset = header.end;
    let name = '';
    for (let i = 0; i < count; i++) {
      const bulk = this.line(offset);
      if (!bulk) return undefined;
      const length = Number(bulk.text.slice(1));
      if (bulk.end + length + 2 > this.pending.length) return undefined;
      if (i === 0) name = this.pending.toString('latin1', bulk.end, bulk.end + length).toUpperCase();
      offset = bulk.end + length + 2;
    }
    return { name, end: offset };
  }

  private line(start: number): { text: string; end: number } | undefined {
    const newline = this.pending.indexOf('\r\n', start, 'latin1');
    if (newline < 0) return undefined;
    return { text: this.pending.toString('latin1', start, newline), end: newline + 2 };
  }
}

/** Counts HTTP requests in a client's byte stream by method, from their request lines. */
export class HttpRequestCounter {
  readonly byMethod = new Map<string, number>();
  private tail = '';

  get total(): number {
    let sum = 0;
    for (const n of this.byMethod.values()) sum += n;
    return sum;
  }

  push(chunk: Buffer): void {
    // Keep a short tail so a request line split across chunks is still seen exactly once.
    const text = this.tail + chunk.toString('latin1');
    const pattern = /(GET|PUT|POST|DELETE|PATCH) \/api[s]?\/\S* HTTP\/1\.1\r\n/g;
    let consumed = 0;
    for (let match = pattern.exec(text); match; match = pattern.exec(text)) {
      this.byMethod.set(match[1]!, (this.byMethod.get(match[1]!) ?? 0) + 1);
      consumed = pattern.lastIndex;
    }
    this.tail = text.slice(Math.max(consumed, text.length - 512));
  }
}
