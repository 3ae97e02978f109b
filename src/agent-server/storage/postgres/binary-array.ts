// Array parameters in PostgreSQL's binary format (what array_recv reads). node-pg sends a Buffer parameter as binary,
// so an array built here skips both halves of the text route: node-pg writing an array literal (every element
// quoted and escaped by regular expressions, bytea as hex) and the server parsing it back character by character
// (array_in, then byteain or jsonb_in per element). Used for the large arrays of the hot statements: stream event
// data, checkpoint blobs and checkpoint JSON. The statement must cast the parameter to the same array type
// (`$4::text[]`, `$8::bytea[]`, `$27::jsonb[]`): the server checks the element type written in the header.

const TEXT_OID = 25;
const BYTEA_OID = 17;
const JSONB_OID = 3802;
/** The version byte that starts jsonb's binary input (jsonb_recv): the JSON text follows. */
const JSONB_VERSION = 1;

/** One-dimensional array, lower bound 1: ndim, has-null flag, element type, length, lower bound, then the elements. */
function encode(oid: number, items: ReadonlyArray<Uint8Array | string | null>, prefix?: number): Buffer {
  const extra = prefix === undefined ? 0 : 1;
  let size = items.length ? 20 : 12;
  let hasNull = 0;
  const lengths = new Array<number>(items.length);
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (item === null) {
      hasNull = 1;
      lengths[i] = -1;
      size += 4;
      continue;
    }
    const n = (typeof item === 'string' ? Buffer.byteLength(item) : item.byteLength) + extra;
    lengths[i] = n;
    size += 4 + n;
  }
  const buf = Buffer.allocUnsafe(size);
  // An empty array has no dimensions (what array_out would write as '{}').
  buf.writeInt32BE(items.length ? 1 : 0, 0);
  buf.writeInt32BE(hasNull, 4);
  buf.writeInt32BE(oid, 8);
  let at = 12;
  if (items.length) {
    buf.writeInt32BE(items.length, 12);
    buf.writeInt32BE(1, 16);
    at = 20;
  }
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    buf.writeInt32BE(lengths[i]!, at);
    at += 4;
    if (item === null) continue;
    if (prefix !== undefined) buf[at++] = prefix;
    if (typeof item === 'string') at += buf.write(item, at, 'utf8');
    else {
      buf.set(item, at);
      at += item.byteLength;
    }
  }
  return buf;
}

/** text[]: each string as UTF-8 (what node-pg writes for a string, lone surrogates included). */
export function textArray(items: ReadonlyArray<string | null | undefined>): Buffer {
  return encode(
    TEXT_OID,
    items.map((s) => s ?? null),
  );
}

/** bytea[]: the bytes as they are. */
export function byteaArray(items: ReadonlyArray<Uint8Array | null | undefined>): Buffer {
  return encode(
    BYTEA_OID,
    items.map((b) => b ?? null),
  );
}

/**
 * jsonb[]: a string element is JSON text already, an object or a number is stringified, as node-pg treats the
 * elements of a jsonb array (a JS array element, which node-pg would take for a nested dimension, is stringified
 * too). The server parses each element's JSON as it would from text.
 */
export function jsonbArray(items: ReadonlyArray<unknown>): Buffer {
  return encode(
    JSONB_OID,
    items.map((v) => (v === null || v === undefined ? null : typeof v === 'string' ? v : (JSON.stringify(v) ?? null))),
    JSONB_VERSION,
  );
}
