// The build Job of an uploaded source tarball on the API-server double: finding it, reading its fetch token, and
// running its fetch step's real script here (its /workspace and token folder moved to a temporary folder) against the
// real control plane, as the pod would.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api, type V1Job } from '@kubernetes/client-node';
import { expect } from 'vitest';
import { packagePath } from '../../../src/lib/package-root.ts';
import { buildSourceTokenSecretName, SOURCE_TOKEN_DIR } from '../../../src/operator/runtimes/kubernetes/build-job.ts';
import { until, type TestCluster } from './cluster.ts';

/**
 * The build Job whose fetch step downloads the tarball with this hash (any tarball build when none is given), other
 * than the Jobs named in `exclude`.
 */
export function sourceBuildJob(
  cluster: TestCluster,
  namespace: string,
  sha256?: string,
  exclude: string[] = [],
): Promise<V1Job> {
  const batch = cluster.kubeConfig.makeApiClient(BatchV1Api);
  return until(
    `the build Job of ${sha256 ? `sha256:${sha256.slice(0, 12)}` : 'a source tarball'}`,
    async () =>
      (await batch.listNamespacedJob({ namespace })).items.find(
        (j) =>
          !exclude.includes(j.metadata!.name!) &&
          j.spec?.template.spec?.initContainers?.[0]?.env?.some(
            (e) => e.name === 'SOURCE_SHA256' && (!sha256 || e.value === sha256),
          ),
      ),
    120_000,
  );
}

/** The fetch token in the build's own Secret (owned by its Job). */
export async function fetchToken(cluster: TestCluster, namespace: string, job: V1Job): Promise<string> {
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const revision = job.metadata!.annotations!['agentplane.dev/revision']!;
  const secret = await until('the fetch token Secret', () =>
    core.readNamespacedSecret({ name: buildSourceTokenSecretName(revision), namespace }),
  );
  expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Job', name: job.metadata!.name });
  return Buffer.from(secret.data!.token!, 'base64').toString('utf8');
}

/**
 * The Job's fetch step, its real script and environment, run here against the real control plane (asynchronously:
 * that server answers from this very process).
 */
export async function runFetchStep(tmp: string, job: V1Job, token: string) {
  const step = job.spec!.template.spec!.initContainers![0]!;
  const dir = mkdtempSync(join(tmp, 'pod-'));
  const workspace = join(dir, 'workspace');
  const tokenDir = join(dir, 'token');
  mkdirSync(workspace);
  mkdirSync(tokenDir);
  writeFileSync(join(tokenDir, 'token'), token);
  const termination = join(dir, 'termination-log');
  writeFileSync(termination, '');
  const env: Record<string, string> = {};
  for (const e of step.env ?? []) env[e.name] = (e.value ?? '').replaceAll(SOURCE_TOKEN_DIR, tokenDir);
  const script = step.command![2]!.replaceAll('/workspace', workspace).replaceAll('/dev/termination-log', termination);
  const r = await new Promise<{ status: number; stdout: string; stderr: string }>((done) => {
    execFile(
      'sh',
      ['-c', script],
      {
        env: {
          ...env,
          PATH: process.env.PATH!,
          TMPDIR: dir,
          // This checkout's copy of what the image keeps at IMAGE_GRAPH_CHECK.
          GRAPH_CHECK_SCRIPT: packagePath('src/operator/runtimes/local/graph-check.mjs'),
        },
      },
      (err, stdout, stderr) => {
        const code = err ? (err as { code?: unknown }).code : 0;
        done({ status: typeof code === 'number' ? code : 1, stdout, stderr });
      },
    );
  });
  return { ...r, workspace, message: readFileSync(termination, 'utf8') };
}
