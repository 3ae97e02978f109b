// store.index.embed as the platform's docs write it, "provider:model": the provider's LangChain embeddings class
// from the project's own node_modules (here a stand-in package with the real package's name and export), built
// with the model; a missing package or an unknown provider fails with a message that says what to do.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { itemsConfig, loadEmbedder } from '../../../src/agent-server/storage/items.ts';

let project: string;
beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'ap-embed-provider-'));
  const pkg = join(project, 'node_modules/@langchain/openai');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(
    join(pkg, 'package.json'),
    JSON.stringify({ name: '@langchain/openai', version: '0.0.0-test', type: 'module', main: 'index.js' }),
  );
  // Vectors that tell which model made them: [model name length, text length, 1].
  writeFileSync(
    join(pkg, 'index.js'),
    `export class OpenAIEmbeddings {
  constructor(fields) { this.model = fields.model; }
  async embedDocuments(texts) { return texts.map((t) => [this.model.length, t.length, 1]); }
  async embedQuery(text) { return [this.model.length, text.length, 1]; }
}\n`,
  );
});
afterAll(() => rmSync(project, { recursive: true, force: true }));

const configFor = (embed: string, dims = 3) => itemsConfig({ index: { embed, dims } }, project);

it('builds the provider class from the project with the model named', async () => {
  const embedder = await loadEmbedder(configFor('openai:text-embedding-3-small'));
  expect(await embedder!.embedQuery('four')).toEqual(['text-embedding-3-small'.length, 4, 1]);
  expect(await embedder!.embedDocuments(['a', 'bb'])).toEqual([
    [22, 1, 1],
    [22, 2, 1],
  ]);
  // store.index.dims still guards what the provider returns.
  const wrongDims = await loadEmbedder(configFor('openai:text-embedding-3-small', 1536));
  await expect(wrongDims!.embedQuery('x')).rejects.toThrow(/3 dimensions; store.index.dims is 1536/);
});

it('names the package to install when the project lacks it, and the known providers for an unknown one', async () => {
  await expect(loadEmbedder(configFor('cohere:embed-english-v3.0'))).rejects.toThrow(
    `store.index.embed "cohere:embed-english-v3.0" needs @langchain/cohere in the project's dependencies`,
  );
  await expect(loadEmbedder(configFor('nosuch:model'))).rejects.toThrow(/unknown provider "nosuch" \(known: openai, /);
});

it('still reads "./file.ts:export" and a bare "file:export" of the project as files', async () => {
  writeFileSync(join(project, 'embed.mjs'), 'export const fn = async (texts) => texts.map(() => [0, 0, 1]);\n');
  writeFileSync(join(project, 'plain'), '');
  const fromFile = await loadEmbedder(configFor('./embed.mjs:fn'));
  expect(await fromFile!.embedQuery('x')).toEqual([0, 0, 1]);
  // "plain:fn" is a file of the project (no provider of that name): it is imported, not refused as a provider.
  await expect(loadEmbedder(configFor('plain:fn'))).rejects.not.toThrow(/unknown provider/);
});
