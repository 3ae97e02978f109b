// Binary array parameters (storage/postgres/binary-array.ts) reach the server as the same values node-pg's text
// route delivers: each case goes both ways through a real server and the two readings must match, element by
// element, for the awkward contents (quotes, backslashes, braces, commas, "NULL", empty strings, NULs in bytes,
// non-ASCII, surrogate pairs, lone surrogates) and for NULL elements and empty arrays.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { byteaArray, jsonbArray, textArray } from '../../../../src/agent-server/storage/postgres/binary-array.ts';
import { createTestDatabase } from '../../helpers/pg.ts';

describe('binary array parameters (postgres)', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let client: pg.Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  /** The array as the server holds it, read back element by element (with each element's length in bytes). */
  const both = async (type: string, viaText: unknown[], viaBinary: Buffer) => {
    const sql = `SELECT i, x::text AS v, octet_length(x::text) AS n, x IS NULL AS isnull
      FROM unnest($1::${type}[]) WITH ORDINALITY AS u(x, i) ORDER BY i`;
    const text = (await client.query(sql, [viaText])).rows;
    const binary = (await client.query(sql, [viaBinary])).rows;
    return { text, binary };
  };

  const strings = [
    'plain',
    '',
    'NULL',
    'null',
    'a,b',
    '{braces}',
    '"quoted"',
    'back\\slash \\" mixed',
    ' leading and trailing ',
    'tab\tnew\nline',
    'ünïcödé and 日本語',
    'emoji 🎉 pair',
    'lone \ud800 surrogate',
    JSON.stringify({ messages: [{ content: 'say "hi"\\n', id: 'x' }] }),
    'x'.repeat(70_000),
  ];

  it('text[]: the same strings as the text route, NULLs included', async () => {
    const values = [...strings, null, 'after null'];
    const { text, binary } = await both('text', values, textArray(values));
    expect(binary).toEqual(text);
    expect(binary).toHaveLength(values.length);
    expect(binary.find((r) => r.isnull)?.i).toBe(String(strings.length + 1));
  });

  it('bytea[]: the same bytes, zero bytes and empty ones included', async () => {
    const values = [
      Buffer.from('plain'),
      Buffer.alloc(0),
      Buffer.from([0, 1, 2, 0, 255, 92, 34, 123, 125, 44]),
      randomBytes(100_000),
      null,
      new Uint8Array([7, 0, 7]),
    ];
    const { text, binary } = await both('bytea', values, byteaArray(values));
    expect(binary).toEqual(text);
    expect(binary.map((r) => Number(r.n))).toEqual(text.map((r) => Number(r.n)));
  });

  it('jsonb[]: objects stringified and JSON text taken as is, as node-pg does', async () => {
    const values: unknown[] = [
      { a: 1, nested: { s: 'with "quotes" and \\ and 日本' }, list: [1, null, true] },
      '{"already": "json text"}',
      null,
      { empty: {} },
      { list: [1, 'two', { three: 3 }] },
      42,
    ];
    const { text, binary } = await both('jsonb', values, jsonbArray(values));
    expect(binary).toEqual(text);
  });

  it('empty arrays', async () => {
    for (const [type, buf] of [
      ['text', textArray([])],
      ['bytea', byteaArray([])],
      ['jsonb', jsonbArray([])],
    ] as const) {
      const { rows } = await client.query(`SELECT cardinality($1::${type}[]) AS n, $1::${type}[] = '{}' AS empty`, [
        buf,
      ]);
      expect(rows[0]).toEqual({ n: 0, empty: true });
    }
  });

  it('a NUL in text or invalid JSON is refused by the server, as on the text route', async () => {
    await expect(client.query('SELECT $1::text[]', [textArray(['a\u0000b'])])).rejects.toThrow(/0x00/);
    await expect(client.query('SELECT $1::text[]', [['a\u0000b']])).rejects.toThrow(/0x00/);
    await expect(client.query('SELECT $1::jsonb[]', [jsonbArray(['{not json'])])).rejects.toThrow(/json/i);
  });
});
