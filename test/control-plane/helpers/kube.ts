import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubeApiServer, type KubeApiServerOptions } from '../../support/kube-apiserver/server.ts';

export const CRD_DIR = resolve(import.meta.dirname, '../../../crds');

/** Namespaces the control-plane tests keep their stores in; the double refuses creates in any other. */
export const TEST_NAMESPACES = ['agents', 'tenants', 'half', 'bad', 'other', 'double'];

/** Starts the API-server double serving crds/ and writes a kubeconfig for it. */
export async function startKube(opts: KubeApiServerOptions = {}) {
  const server = new KubeApiServer({ crdDir: CRD_DIR, namespaces: TEST_NAMESPACES, ...opts });
  await server.start();
  const dir = mkdtempSync(join(tmpdir(), 'ap-kube-'));
  const kubeconfig = server.writeKubeconfig(join(dir, 'kubeconfig'));
  return {
    server,
    kubeconfig,
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
