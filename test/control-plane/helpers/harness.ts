import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { createControlPlane, type ControlPlaneDeps } from '../../../src/control-plane/app.ts';
import { createApiKey } from '../../../src/control-plane/api-keys/keys.ts';
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

export type WorkspacesApp = {
  app: FastifyInstance;
  store: PlatformState;
  /** The app's temporary folder: the store is in store/, the rest is the test's. */
  dir: string;
  /** Headers of an admin of workspace team-a, and of one of team-b only. */
  headersA: Record<string, string>;
  headersB: Record<string, string>;
  close(): Promise<void>;
};

/**
 * The real app (no console) over an embedded store in a temporary folder of its own, with an admin key for workspace
 * team-a and another for team-b; `features` adds what is under test, given that folder for what it keeps on disk.
 */
export async function workspacesApp(
  prefix: string,
  features: (dir: string) => Partial<ControlPlaneDeps>,
): Promise<WorkspacesApp> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const store = openEmbeddedPlatformState({ dataDir: join(dir, 'store') });
  const headers = async (tenant: string) => ({
    'x-api-key': (await createApiKey(store, { tenants: [tenant] })).key,
    'x-tenant-id': tenant,
  });
  const headersA = await headers('team-a');
  const headersB = await headers('team-b');
  const app = await createControlPlane({
    store,
    logger: silentLogger(),
    policy: DEFAULT_INPUT_POLICY,
    consoleDir: false,
    ...features(dir),
  });
  return {
    app,
    store,
    dir,
    headersA,
    headersB,
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
