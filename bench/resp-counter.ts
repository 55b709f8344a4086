/**
 * Counts the Redis commands in clients' byte streams (RESP arrays of bulk strings, as every client
 * library sends them), by command name. Bytes may arrive split anywhere, and the chunks of several
 * connections interleave (a process holds many): each connection is parsed on its own.
 */
export class RespCommandCounter {
  readonly byCommand = new Map<string, number>();
  /** Each connection's bytes not yet parsed into a whole command. */
  private readonly pending = new Map<number, Buffer>();

  get total(): number {
    let sum = 0;
    for (const n of this.byCommand.values()) sum += n;
    return sum;
  }

  /** Counts the whole commands `chunk` completes on `connection` (an id of the caller's choosing). */
  push(chunk: Buffer, connection = 0): void {
    const earlier = this.pending.get(connection);
    const bytes = earlier === undefined ? chunk : Buffer.concat([earlier, chunk]);
    let offset = 0;
    for (;;) {
      const parsed = parseCommand(bytes, offset);
      if (!parsed) break;
      this.byCommand.set(parsed.name, (this.byCommand.get(parsed.name) ?? 0) + 1);
      offset = parsed.end;
    }
    if (offset === bytes.length) this.pending.delete(connection);
    else this.pending.set(connection, bytes.subarray(offset));
  }
}

/** One complete command of `bytes` from `start`, or undefined when more bytes are needed. */
function parseCommand(bytes: Buffer, start: number): { name: string; end: number } | undefined {
  const header = line(bytes, start);
  if (!header) return undefined;
  if (bytes[start] !== 0x2a /* '*' */) throw new Error('not a RESP array: only multibulk requests are counted');
  const count = Number(header.text.slice(1));
  let offset = header.end;
  let name = '';
  for (let i = 0; i < count; i++) {
    const bulk = line(bytes, offset);
    if (!bulk) return undefined;
    const length = Number(bulk.text.slice(1));
    if (bulk.end + length + 2 > bytes.length) return undefined;
    if (i === 0) name = bytes.toString('latin1', bulk.end, bulk.end + length).toUpperCase();
    offset = bulk.end + length + 2;
  }
  return { name, end: offset };
}

function line(bytes: Buffer, start: number): { text: string; end: number } | undefined {
  const newline = bytes.indexOf('\r\n', start, 'latin1');
  if (newline < 0) return undefined;
  return { text: bytes.toString('latin1', start, newline), end: newline + 2 };
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
