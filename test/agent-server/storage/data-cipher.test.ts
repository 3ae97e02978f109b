// The data keys and sealed values, as someone who can change stored bytes or read logs would try them: a changed
// byte never opens, a value sealed under another key names that key's id and nothing of a key, the keyring logs
// as its id, and a bad LANGGRAPH_AES_KEY is refused naming its length, not its value.
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAgentServerConfig } from '../../../src/agent-server/config.ts';
import { LeanCheckpointSerializer } from '../../../src/agent-server/shims/checkpoint-serde.ts';
import {
  DataKeyError,
  DataKeyring,
  EncryptingSerializer,
  isSealed,
  jsonCodec,
  resealText,
} from '../../../src/agent-server/storage/data-cipher.ts';
import { UsageError } from '../../../src/lib/cli-args.ts';

const K1 = 'k1-sixteen-bytes';
const K2 = 'k2-is-twenty-four-bytes!';

describe('data keys', () => {
  it('seals to ASCII that opens to the same bytes, a fresh IV each time', () => {
    const ring = DataKeyring.fromTexts(K1);
    const a = ring.seal('{"note":"hello ✓"}');
    const b = ring.seal('{"note":"hello ✓"}');
    expect(a).not.toBe(b);
    expect(isSealed(a)).toBe(true);
    expect(/^[\x20-\x7e]+$/.test(a)).toBe(true);
    expect(ring.open(a).toString('utf8')).toBe('{"note":"hello ✓"}');
    expect(a.startsWith(`apenc1:${ring.currentId}:`)).toBe(true);
  });

  it('a changed byte anywhere in a sealed value does not open', () => {
    const ring = DataKeyring.fromTexts(K1);
    const sealed = ring.seal('{"balance":100}');
    const body = Buffer.from(sealed.slice(sealed.lastIndexOf(':') + 1), 'base64');
    for (const at of [0, 12, body.length - 1]) {
      const changed = Buffer.from(body);
      changed[at] = changed[at]! ^ 1;
      const forged = `${sealed.slice(0, sealed.lastIndexOf(':') + 1)}${changed.toString('base64')}`;
      expect(() => ring.open(forged)).toThrow(/does not authenticate/);
    }
  });

  it('a value sealed under a key the ring lacks names its key id, never key material', () => {
    const old = DataKeyring.fromTexts(K1);
    const sealed = old.seal('{}');
    let message = '';
    try {
      DataKeyring.fromTexts(K2).open(sealed);
    } catch (err) {
      expect(err).toBeInstanceOf(DataKeyError);
      message = (err as Error).message;
    }
    expect(message).toContain(old.currentId);
    expect(message).not.toContain(K1);
    // With the old key among the previous ones it opens, and resealing moves it to the current key.
    const rotated = DataKeyring.fromTexts(K2, [K1]);
    const resealed = resealText(rotated, sealed)!;
    expect(rotated.isCurrent(resealed)).toBe(true);
    expect(DataKeyring.fromTexts(K2).open(resealed).toString()).toBe('{}');
    expect(resealText(rotated, resealed)).toBeNull();
  });

  it('a keyring logs and serialises as its key id only', () => {
    const ring = DataKeyring.fromTexts(K2, [K1]);
    for (const shown of [JSON.stringify({ ring }), inspect(ring), inspect({ deep: { ring } }), String(ring.toJSON())]) {
      expect(shown).toContain(ring.currentId);
      expect(shown).not.toContain(K1);
      expect(shown).not.toContain(K2);
    }
    const config = parseAgentServerConfig([], { LANGGRAPH_AES_KEY: K2, AGENTPLANE_AES_PREVIOUS_KEYS: K1 }, '/srv');
    expect(config!.dataKeyring!.currentId).toBe(ring.currentId);
    expect(JSON.stringify(config)).not.toContain(K2);
    expect(inspect(config, { depth: 10 })).not.toContain(K1);
  });

  it('refuses a LANGGRAPH_AES_KEY the LangGraph platform would refuse, naming its length and not its value', () => {
    const bad = 'not-a-valid-key-length';
    let err: unknown;
    try {
      parseAgentServerConfig([], { LANGGRAPH_AES_KEY: bad }, '/srv');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toBe('LANGGRAPH_AES_KEY must be 16, 24 or 32 bytes long (it is 22)');
    expect(() => parseAgentServerConfig([], { AGENTPLANE_AES_PREVIOUS_KEYS: K1 }, '/srv')).toThrow(
      /AGENTPLANE_AES_PREVIOUS_KEYS is set without LANGGRAPH_AES_KEY/,
    );
    expect(parseAgentServerConfig([], {}, '/srv')!.dataKeyring).toBeUndefined();
  });

  it('a store without a key reads plain JSON and refuses sealed values, saying a key is missing', () => {
    const sealed = DataKeyring.fromTexts(K1).seal('{"a":1}');
    const plain = jsonCodec(undefined);
    expect(plain.read('{"a":1}')).toEqual({ a: 1 });
    expect(() => plain.read(sealed)).toThrow(/no LANGGRAPH_AES_KEY is set/);
    // A plain string that merely starts like a sealed value is still plain JSON.
    expect(jsonCodec(DataKeyring.fromTexts(K1)).read('"apenc1:not sealed"')).toBe('apenc1:not sealed');
  });
});

describe('checkpoint serde with data keys', () => {
  const ring = DataKeyring.fromTexts(K1);
  const serde = new EncryptingSerializer(new LeanCheckpointSerializer(), ring);

  it('writes sealed values typed "+aesgcm" and reads them, and values written before encryption', async () => {
    const value = { messages: ['secret'], n: 1 };
    const [type, data] = await serde.dumpsTyped(value);
    expect(type).toBe('json+aesgcm');
    expect(Buffer.from(data).toString('latin1')).not.toContain('secret');
    expect(await serde.loadsTyped(type, data)).toEqual(value);
    // As SqliteSaver reads pending writes: CAST(value AS TEXT).
    expect(await serde.loadsTyped(type, Buffer.from(data).toString('latin1'))).toEqual(value);
    const [plainType, plainData] = await new LeanCheckpointSerializer().dumpsTyped(value);
    expect(await serde.loadsTyped(plainType, plainData)).toEqual(value);
    // SqliteSaver keeps one type per row: its metadata, plain, under the checkpoint's "+aesgcm" type.
    expect(await serde.loadsTyped('json+aesgcm', plainData)).toEqual(value);
  });

  it('refuses a cipher it does not know (the LangGraph platform\'s "+aes", AES-EAX) with a message saying so', async () => {
    await expect(serde.loadsTyped('json+aes', new Uint8Array(40))).rejects.toThrow(/cipher "aes"/);
  });
});
