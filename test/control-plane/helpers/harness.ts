import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { createApiKey } from '../../../src/control-plane/auth/keys.ts';
import { DEFAULT_INPUT_POLICY, type InputPolicy } from '../../../src/api/input-rules.ts';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

export type ApiHarness = {
  app: FastifyInstance;
  store: PlatformState;
  /** Key for tenant-a and tenant-b. */
  key: string;
  /** Key for tenant-c only. */
  otherKey: string;
  close(): Promise<void>;
};

/** Custom hosts under `.example` are allowed (tests PATCH custom_url https://a.example). */
export async function apiHarness(
  policy: InputPolicy = { ...DEFAULT_INPUT_POLICY, allowedCustomDomains: ['example'] },
): Promise<ApiHarness> {
  const dir = mkdtempSync(join(tmpdir(), 'ap-cp-api-'));
  const store = openEmbeddedPlatformState({ dataDir: dir });
  const app = await createControlPlane({ store, logger: silentLogger(), policy });
  const { key } = await createApiKey(store, { tenants: ['tenant-a', 'tenant-b'], name: 'test' });
  const { key: otherKey } = await createApiKey(store, { tenants: ['tenant-c'] });
  return {
    app,
    store,
    key,
    otherKey,
    close: async () => {
      await app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const githubBody = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  source: 'github',
  source_config: {
    integration_id: 'int-1',
    repo_url: 'https://github.com/example/agent',
    deployment_type: 'dev',
    build_on_push: false,
    custom_url: null,
    resource_spec: { min_scale: 1, max_scale: 3, cpu: 1, memory_mb: 1024 },
  },
  source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null },
  secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-very-secret-value' }],
  ...extra,
});
