// Listener deployments on a real Kubernetes control plane (test/support/kube-control-plane.ts): a control plane
// elsewhere (`agentplane dev`, started here) and a data-plane-only install of the chart (`controlPlane.enabled:
// false`, `listener.enabled: true`) put in with the real `helm install --wait` into a namespace enforcing Pod
// Security restricted. The listener and the operator run as `agentplane` processes with the arguments and environment
// of the chart's own Deployments, read back from the API server, under tokens of the chart's ServiceAccounts: RBAC is
// exactly the chart's. A workspace's flow on the control plane: create (prebuilt image) -> the listener writes the
// AgentDeployment/AgentRevision -> the operator's Deployment, the real ReplicaSet and pods Running on kwok nodes ->
// DEPLOYED reported back; a patch makes a new revision; delete goes through the real garbage collector.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/helm/index.ts';
import { startKubeControlPlane, type KubeControlPlane } from '../support/kube-control-plane.ts';
import { TENANT, api, startDev, stopDev, type DevProcess } from '../dev/helpers.ts';
import { BINARIES_ENV } from './global-setup.ts';
import { clusterBed, helmInstall, restrictedNamespace, until, type Json } from './helpers.ts';

const binaries = process.env[BINARIES_ENV];
const NS = 'agents';
const IMAGE = 'ghcr.io/agentplane/example-agent';
/** The Secret the admin makes for the listener key before the install (the chart's apiKey.existingSecret). */
const KEY_SECRET = 'listener-key';

describe.skipIf(!binaries)(
  'a listener data plane (chart, listener, operator) on a real Kubernetes control plane',
  () => {
    let kube: KubeControlPlane;
    let dev: DevProcess;
    let tmp: string;
    let cp: ReturnType<typeof api>;
    let lid = '';

    // The processes' output and working folder are the test's folder (the listener's default data folder, relative,
    // lands there as in the pod's /tmp).
    const bed = clusterBed(
      () => kube,
      () => tmp,
      () => tmp,
    );
    const { processes, get, logOf, startAgentplane } = bed;
    const chartContainer = (component: string) => bed.chartContainer(NS, component, { secrets: true });
    const cr = (plural: string, name: string) =>
      get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/${plural}/${name}`);
    const withLogs = (err: unknown) => {
      throw new Error(
        `${String(err)}\nlistener:\n${logOf('agentplane-listener')}\noperator:\n${logOf('agentplane-operator')}`,
      );
    };

    /** The listener as the chart's Deployment runs it (its key read from the Secret); resolves once it reported. */
    const startListener = async () => {
      const lis = await chartContainer('listener');
      const child = startAgentplane(
        'agentplane-listener',
        [...lis.args, '--kubeconfig', (await kube.as(NS, lis.serviceAccount)).kubeconfigPath],
        { ...lis.env, LOG_LEVEL: 'info' },
      );
      const since = Date.now();
      await until('the listener connected', async () => {
        const seen = (await cp.get(`/v2/listeners/${lid}`)).body.last_seen_at as string | null;
        return seen !== null && Date.parse(seen) >= since - 1_000;
      }).catch(withLogs);
      return child;
    };

    beforeAll(async () => {
      tmp = mkdtempSync(join(tmpdir(), 'ap-kube-listener-'));
      [kube, dev] = await Promise.all([startKubeControlPlane({ binaries: binaries! }), startDev(join(tmp, 'cp'))]);
      cp = api(dev.url);
      // On the control plane: the listener record and its key, as docs/listeners.md has the workspace make them.
      const created = await cp.post('/v2/listeners', {
        compute_type: 'k8s',
        compute_id: 'real-cluster',
        compute_config: { k8s_namespaces: [NS] },
        // The cluster serves deployments at their Service's host (no base domain here): <name>.<namespace>.svc.
        base_url: `http://${NS}.svc`,
      });
      if (created.status !== 201) throw new Error(`POST /v2/listeners: ${JSON.stringify(created.body)}`);
      lid = String(created.body.id);
      const key = String((await cp.post(`/v2/listeners/${lid}/keys`, {})).body.key);

      // In the cluster, as docs/kubernetes.md has the admin do it: the namespace (restricted), the key's Secret, then
      // the data-plane-only release.
      const admin = kube.admin.kubeconfigPath;
      await restrictedNamespace(admin, NS);
      await kubectl(['-n', NS, 'create', 'secret', 'generic', KEY_SECRET, `--from-literal=api-key=${key}`], admin);
      const values: Record<string, unknown> = {
        'controlPlane.enabled': false,
        'listener.enabled': true,
        'listener.controlPlaneUrl': dev.url,
        'listener.tenant': TENANT,
        'listener.listenerId': lid,
        'listener.apiKey.existingSecret': KEY_SECRET,
      };
      helmInstall(admin, NS, values);
      expect(await get(`/apis/apps/v1/namespaces/${NS}/deployments/agentplane-control-plane`)).toBeUndefined();

      await bed.startOperator(NS, 'agentplane-operator-0', { name: 'agentplane-operator', secrets: true });
      await startListener();
    });

    afterAll(async () => {
      await bed.stopAll();
      if (dev) await stopDev(dev);
      await kube?.stop();
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    });

    const rollout = (name: string) => bed.rollout(NS, name);
    const runs = (name: string, image: string) => bed.runs(NS, name, image);
    const revisionStatus = async (id: string, rev: string) =>
      (await cp.get(`/v2/deployments/${id}/revisions/${rev}`)).body.status as string;

    it('create on the control plane -> resources written by the listener -> pods Running -> DEPLOYED; patch; delete', async () => {
      const created = await cp.post('/v2/deployments', {
        name: 'listener-agent',
        source: 'external_docker',
        source_config: { deployment_type: 'dev', listener_id: lid, listener_config: { k8s_namespace: NS } },
        source_revision_config: { image_uri: `${IMAGE}:0.1.0` },
        secrets: [{ name: 'TOKEN', value: 'listener-real-secret' }],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const id = String(created.body.id);
      const r1 = String(created.body.latest_revision_id);
      const name = `ag-${id}`;

      const ad = await until('the AgentDeployment written by the listener', () => cr('agentdeployments', name)).catch(
        withLogs,
      );
      expect(ad.metadata.labels['agentplane.dev/listener']).toBe(lid);
      // Written right after its AgentDeployment (the revision's owner), not in the same request.
      await until('the AgentRevision r1 written by the listener', () => cr('agentrevisions', `${name}-r1`)).catch(
        withLogs,
      );
      await until('its pods Running on kwok nodes', () => runs(name, `${IMAGE}:0.1.0`), 90_000).catch(withLogs);
      expect((await rollout(name)).sets).toHaveLength(1);
      await until(
        'r1 DEPLOYED on the control plane',
        async () => (await revisionStatus(id, r1)) === 'DEPLOYED',
        90_000,
      ).catch(withLogs);
      const shown = (await cp.get(`/v2/deployments/${id}`)).body;
      expect(shown.active_revision_id).toBe(r1);
      expect(shown.url).toBe((await cr('agentdeployments', name))!.status.url);
      expect(shown.url).toContain(`.${NS}.svc`);

      // A patch: revision 2 as a resource of the cluster, rolled out by the real Deployment controller, reported.
      const patched = await cp.patch(`/v2/deployments/${id}`, {
        source_revision_config: { image_uri: `${IMAGE}:0.2.0` },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      const r2 = String(patched.body.latest_revision_id);
      expect(r2).not.toBe(r1);
      // The listener's pod dies (no goodbye) and the Deployment brings a new one: nothing is written twice.
      const first = processes.get('agentplane-listener')!;
      const killed = new Promise((r) => first.once('exit', r));
      first.kill('SIGKILL');
      await killed;
      await startListener();
      await until('r2 written', () => cr('agentrevisions', `${name}-r2`)).catch(withLogs);
      await until('0.2.0 running on kwok nodes', () => runs(name, `${IMAGE}:0.2.0`), 120_000).catch(withLogs);
      await until(
        'r2 DEPLOYED on the control plane',
        async () => (await revisionStatus(id, r2)) === 'DEPLOYED',
        90_000,
      ).catch(withLogs);
      expect((await cp.get(`/v2/deployments/${id}`)).body.active_revision_id).toBe(r2);
      expect(await cr('agentrevisions', `${name}-r3`)).toBeUndefined();
      expect((await cp.get(`/v2/deployments/${id}/revisions`)).body.resources).toHaveLength(2);
      expect((await cr('agentdeployments', name))!.metadata.uid).toBe(ad.metadata.uid);
      // The secret reaches the pods as the kubelet would read it: the env Secret the pod template names.
      const pod = (await rollout(name)).pods.find((p) => !p.metadata.deletionTimestamp)!;
      const envSecret = pod.spec.containers[0].envFrom?.[0]?.secretRef?.name as string;
      const secret = await get(`/api/v1/namespaces/${NS}/secrets/${envSecret}`);
      expect(Buffer.from(secret!.data.TOKEN, 'base64').toString('utf8')).toBe('listener-real-secret');

      // Delete on the control plane: the listener deletes the AgentDeployment, the real garbage collector the rest.
      const { d } = await rollout(name);
      expect((await cp.delete(`/v2/deployments/${id}`)).status).toBe(204);
      await until('the AgentDeployment gone', async () => !(await cr('agentdeployments', name)), 90_000).catch(
        withLogs,
      );
      await until(
        'the Deployment, ReplicaSets, pods, Service and revisions gone',
        async () => {
          const left = [
            await get(`/apis/apps/v1/namespaces/${NS}/deployments/${name}`),
            await get(`/api/v1/namespaces/${NS}/services/${name}`),
          ].filter(Boolean);
          const sets = ((await get(`/apis/apps/v1/namespaces/${NS}/replicasets`))!.items as Json[]).filter((x) =>
            x.metadata.ownerReferences?.some((o: Json) => o.uid === d.metadata.uid),
          );
          const pods = ((await get(`/api/v1/namespaces/${NS}/pods`))!.items as Json[]).filter((p) =>
            p.metadata.name.startsWith(`${name}-`),
          );
          const revs = (
            (await get(`/apis/agentplane.dev/v1alpha1/namespaces/${NS}/agentrevisions`))!.items as Json[]
          ).filter((r) => r.metadata.name.startsWith(`${name}-`));
          return left.length + sets.length + pods.length + revs.length === 0;
          // The garbage collector works dependents level by level: tens of seconds.
        },
        150_000,
      );
      expect((await cp.get(`/v2/deployments/${id}`)).status).toBe(404);
      // Every right the listener and the operator used is one the chart grants: the API server refused them nothing.
      const logs = `${logOf('agentplane-listener', 100_000)}\n${logOf('agentplane-operator', 100_000)}`;
      expect(logs).not.toMatch(/forbidden/i);
    });
  },
);
