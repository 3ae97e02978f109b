// zodSchemaController (src/lib/http.ts): both apps compile their routes' zod schemas themselves, so creating an app
// must not load fastify's own compilers (ajv, fast-json-stringify), which each process start paid for only to have
// them replaced (fastify itself needs only fast-json-stringify's small serializer module). Checked in a fresh Node process: the suite's own process has loaded ajv long ago (other packages use it).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

const SCRIPT = `
import { createRequire } from 'node:module';
import fastify from 'fastify';
import { z } from 'zod';
import { installErrorAnswers, installJsonBodyParser, zodSchemaController } from './src/lib/http.ts';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';

const app = fastify(process.env.PLAIN === '1' ? {} : { schemaController: zodSchemaController });
app.setValidatorCompiler(validatorCompiler);
app.setSerializerCompiler(serializerCompiler);
installJsonBodyParser(app);
installErrorAnswers(app, {
  invalid: (issues) => ({ detail: 'invalid: ' + issues.map((i) => i.path.join('.')).join(',') }),
  malformed: (message) => ({ detail: 'malformed: ' + message }),
  logUnexpected: () => undefined,
});
app.post('/echo', {
  schema: { body: z.object({ n: z.number() }), response: { 200: z.object({ twice: z.number() }) } },
}, async (req) => ({ twice: req.body.n * 2, dropped: true }));
await app.ready();
const ok = await app.inject({ method: 'POST', url: '/echo', payload: { n: 21 } });
const bad = await app.inject({ method: 'POST', url: '/echo', payload: { n: 'x' } });
const require = createRequire(import.meta.url);
const loaded = Object.keys(require.cache).filter((f) => /node_modules\\/(ajv\\/|@fastify\\/ajv-compiler\\/|@fastify\\/fast-json-stringify-compiler\\/|fast-json-stringify\\/index\\.js)/.test(f));
process.stdout.write(JSON.stringify({ ok: [ok.statusCode, ok.json()], bad: [bad.statusCode, bad.json()], loaded: loaded.length }));
await app.close();
`;

async function runApp(env: Record<string, string> = {}) {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', SCRIPT],
    { cwd: ROOT, env: { ...process.env, ...env } },
  );
  return JSON.parse(stdout) as { ok: [number, unknown]; bad: [number, unknown]; loaded: number };
}

describe('zodSchemaController', () => {
  it("validates and serializes with zod and never loads fastify's ajv or fast-json-stringify compilers", async () => {
    const [withController, plain] = await Promise.all([runApp(), runApp({ PLAIN: '1' })]);
    // The response schema drops what it does not name; a body of the wrong type is a 422 naming the field.
    expect(withController.ok).toEqual([200, { twice: 42 }]);
    expect(withController.bad).toEqual([422, { detail: 'invalid: n' }]);
    expect(withController.loaded).toBe(0);
    // The same app made without it answers alike but loads them at creation (what this saves).
    expect(plain.ok).toEqual(withController.ok);
    expect(plain.bad).toEqual(withController.bad);
    expect(plain.loaded).toBeGreaterThan(0);
  });
});
