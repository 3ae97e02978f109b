// A TCP relay between an agent server and PostgreSQL that counts the statements the server sends, from the wire
// protocol's frontend messages: a simple Query ('Q') is one statement (pg sends parameterless SQL so, one or more
// statements per message: counted as one), an Execute ('E') of the extended protocol is one (parameterised and
// prepared statements). Every connection of the server goes through it (HTTP thread, executor threads, LISTEN), so
// the bench can report statements per run cycle without touching the server. No TLS: bench servers use 127.0.0.1.
import net from 'node:net';

export interface StatementCounter {
  /** host:port to put in the server's database URL instead of PostgreSQL's. */
  readonly port: number;
  /** Statements sent so far (all connections). */
  statements(): number;
  /** Statements sent so far by SQL text (its first 100 characters, whitespace folded), most first. */
  byText(): Array<[sql: string, count: number]>;
  close(): Promise<void>;
}

/** Follows one connection's frontend messages: [type byte][int32 length incl. itself][body]; the first has no type. */
function messageCounter(onStatement: (sql: string) => void): (chunk: Buffer) => void {
  let startup = true;
  // Extended protocol: Parse names a statement's SQL, Bind puts a statement in a portal, Execute runs the portal.
  const prepared = new Map<string, string>();
  let bound = '';
  const cstring = (buf: Buffer, from: number): [string, number] => {
    const end = buf.indexOf(0, from);
    return [buf.toString('utf8', from, end), end + 1];
  };
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let at = 0;
    for (;;) {
      if (startup) {
        // StartupMessage / SSLRequest / GSSENCRequest: int32 length, no type byte.
        if (pending.length - at < 4) break;
        const len = pending.readInt32BE(at);
        if (pending.length - at < len) break;
        // An SSLRequest (80877103) is answered 'N' here and followed by the real startup message.
        const code = len >= 8 ? pending.readInt32BE(at + 4) : 0;
        startup = code === 80877103 || code === 80877104;
        at += len;
        continue;
      }
      if (pending.length - at < 5) break;
      const type = pending[at]!;
      const len = pending.readInt32BE(at + 1);
      if (pending.length - at < 1 + len) break;
      const body = at + 5;
      if (type === 0x51 /* Q */) onStatement(cstring(pending, body)[0]);
      else if (type === 0x50 /* P */) {
        const [name, next] = cstring(pending, body);
        const sql = cstring(pending, next)[0];
        prepared.set(name, name ? `[${name}] ${sql}` : sql);
      } else if (type === 0x42 /* B */) {
        const [, next] = cstring(pending, body); // portal
        bound = prepared.get(cstring(pending, next)[0]) ?? '?';
      } else if (type === 0x45 /* E */) onStatement(bound);
      at += 1 + len;
    }
    pending = at === pending.length ? Buffer.alloc(0) : pending.subarray(at);
  };
}

export async function startStatementCounter(target: { host: string; port: number }): Promise<StatementCounter> {
  let count = 0;
  const texts = new Map<string, number>();
  const onStatement = (sql: string) => {
    count++;
    const key = sql.replace(/\s+/g, ' ').trim().slice(0, 100);
    texts.set(key, (texts.get(key) ?? 0) + 1);
  };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    const count1 = messageCounter(onStatement);
    client.on('data', (d: Buffer) => {
      count1(d);
      if (!upstream.write(d)) client.pause();
    });
    upstream.on('drain', () => client.resume());
    upstream.on('data', (d: Buffer) => {
      if (!client.write(d)) upstream.pause();
    });
    client.on('drain', () => upstream.resume());
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    statements: () => count,
    byText: () => [...texts].sort((a, b) => b[1] - a[1]),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
