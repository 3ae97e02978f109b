import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  cosine,
  itemsConfig,
  listNamespaces,
  matchesFilter,
  namespaceMatches,
  readItemsConfig,
  textsToEmbed,
} from '../../../src/agent-server/storage/items.ts';

describe('matchesFilter', () => {
  const value = { kind: 'note', size: 5, name: 'b', tags: ['x'], nested: { a: 1 }, none: null };
  const table: [string, Record<string, unknown>, boolean][] = [
    ['equal string', { kind: 'note' }, true],
    ['different string', { kind: 'todo' }, false],
    ['equal array', { tags: ['x'] }, true],
    ['equal object', { nested: { a: 1 } }, true],
    ['null equals null', { none: null }, true],
    ['missing key never equals', { other: 'x' }, false],
    ['$eq', { size: { $eq: 5 } }, true],
    ['$ne', { size: { $ne: 5 } }, false],
    ['$ne on a missing key', { other: { $ne: 1 } }, true],
    ['$gt number', { size: { $gt: 4 } }, true],
    ['$gt equal', { size: { $gt: 5 } }, false],
    ['$gte', { size: { $gte: 5 } }, true],
    ['$lt', { size: { $lt: 5 } }, false],
    ['$lte', { size: { $lte: 5 } }, true],
    ['$gt string', { name: { $gt: 'a' } }, true],
    ['$gt across types is false', { name: { $gt: 1 } }, false],
    ['$in', { kind: { $in: ['todo', 'note'] } }, true],
    ['$nin', { kind: { $nin: ['todo', 'note'] } }, false],
    ['$nin on a missing key', { other: { $nin: ['x'] } }, true],
    ['$exists true', { size: { $exists: true } }, true],
    ['$exists false', { other: { $exists: false } }, true],
    ['range', { size: { $gt: 1, $lt: 10 } }, true],
    ['all keys must match', { kind: 'note', size: 6 }, false],
    ['an object that is not operators is compared whole', { nested: { a: 2 } }, false],
  ];
  it.each(table)('%s', (_name, filter, ok) => {
    expect(matchesFilter(value, filter)).toBe(ok);
  });
  it('no filter matches everything', () => {
    expect(matchesFilter(value, undefined)).toBe(true);
    expect(matchesFilter(value, {})).toBe(true);
  });
});

describe('namespaces', () => {
  const table: [string[], 'prefix' | 'suffix', string[], boolean][] = [
    [['a', 'b', 'c'], 'prefix', ['a'], true],
    [['a', 'b', 'c'], 'prefix', ['a', 'b'], true],
    [['a', 'bc'], 'prefix', ['a', 'b'], false],
    [['a', 'b'], 'prefix', ['a', 'b', 'c'], false],
    [['a', 'b', 'c'], 'prefix', ['*', 'b'], true],
    [['a', 'b', 'c'], 'suffix', ['c'], true],
    [['a', 'b', 'c'], 'suffix', ['*', 'c'], true],
    [['a', 'b', 'c'], 'suffix', ['b'], false],
  ];
  it.each(table)('%j %s %j -> %s', (ns, matchType, path, ok) => {
    expect(namespaceMatches(ns, { matchType, path })).toBe(ok);
  });

  it('lists: match, cut to max depth, dedupe, sort, page', () => {
    const all = [
      ['b', 'x'],
      ['a', 'y', 'z'],
      ['a', 'y'],
      ['a', 'x'],
    ];
    expect(listNamespaces(all, { limit: 10, offset: 0 })).toEqual([
      ['a', 'x'],
      ['a', 'y'],
      ['a', 'y', 'z'],
      ['b', 'x'],
    ]);
    expect(listNamespaces(all, { maxDepth: 1, limit: 10, offset: 0 })).toEqual([['a'], ['b']]);
    expect(
      listNamespaces(all, { matchConditions: [{ matchType: 'prefix', path: ['a'] }], limit: 1, offset: 1 }),
    ).toEqual([['a', 'y']]);
    expect(
      listNamespaces(all, { matchConditions: [{ matchType: 'suffix', path: ['x'] }], limit: 10, offset: 0 }),
    ).toEqual([
      ['a', 'x'],
      ['b', 'x'],
    ]);
  });
});

describe('semantic index helpers', () => {
  it('cosine', () => {
    expect(cosine([1, 0], [1, 0])).toBeCloseTo(1);
    expect(cosine([1, 0], [0, 1])).toBeCloseTo(0);
    expect(cosine([0, 0], [1, 1])).toBe(0);
  });
  it('texts of the indexed fields; "$" is the whole value; missing fields are skipped', () => {
    expect(textsToEmbed({ text: 'hi', meta: { n: 1 } }, ['text', 'meta.n', 'gone', '$'])).toEqual([
      { field: 'text', text: 'hi' },
      { field: 'meta.n', text: '1' },
      { field: '$', text: '{"text":"hi","meta":{"n":1}}' },
    ]);
  });
});

describe('langgraph.json "store"', () => {
  it('defaults: no TTL, refresh on read, no sweep, no index', () => {
    expect(itemsConfig(undefined)).toEqual({
      projectDir: undefined,
      index: undefined,
      ttl: { defaultMinutes: null, refreshOnRead: true, sweepMinutes: null },
    });
  });
  it('a TTL section sweeps hourly unless told; an index without embed is ignored', () => {
    expect(itemsConfig({ ttl: { default_ttl: 10 }, index: { dims: 4 } }, '/p')).toEqual({
      projectDir: '/p',
      index: undefined,
      ttl: { defaultMinutes: 10, refreshOnRead: true, sweepMinutes: 60 },
    });
    expect(itemsConfig({ index: { embed: './e.ts:f', dims: 3 } }).index).toEqual({
      embed: './e.ts:f',
      dims: 3,
      fields: ['$'],
    });
  });
  it('names the wrong key of an invalid section', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-store-config-'));
    try {
      const file = join(dir, 'langgraph.json');
      writeFileSync(file, JSON.stringify({ graphs: { g: './g.ts:g' }, store: { ttl: { default_ttl: 'soon' } } }));
      await expect(readItemsConfig(file)).rejects.toThrow(/store\.ttl\.default_ttl/);
      writeFileSync(
        file,
        JSON.stringify({ graphs: { g: './g.ts:g' }, store: { ttl: { default_ttl: 5, refresh_on_read: false } } }),
      );
      expect((await readItemsConfig(file)).ttl).toEqual({ defaultMinutes: 5, refreshOnRead: false, sweepMinutes: 60 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
