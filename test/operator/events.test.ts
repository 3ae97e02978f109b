// The operator's Event recorder against the API-server double (which validates every Event against the official
// events.k8s.io/v1 schema), as the chart's operator ServiceAccount: a flapping deployment repeats one Event (it
// becomes one object with a series count, not thousands) or many different ones (a burst, then nothing), and a
// long message is cut to the API's 1 kB.
import { EventsV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { kubeEventRecorder } from '../../src/operator/kube-events.ts';
import { startCluster, type TestCluster } from '../support/kubernetes/cluster.ts';

const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'test' });
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
});
afterAll(async () => {
  await cluster?.close();
});

const subject = (name: string) => ({
  apiVersion: 'agentplane.dev/v1alpha1',
  kind: 'AgentDeployment',
  metadata: { name, namespace: NS, uid: `uid-${name}` },
});

async function eventsAbout(name: string) {
  const api = cluster.kubeConfig.makeApiClient(EventsV1Api);
  return (await api.listNamespacedEvent({ namespace: NS })).items.filter((e) => e.regarding?.name === name);
}

describe('kubeEventRecorder', () => {
  let t = Date.parse('2026-12-01T00:00:00Z');
  const recorder = () =>
    kubeEventRecorder({
      kubeConfig: cluster.as('agentplane-operator').kubeConfig,
      instance: 'agentplane-operator-0',
      logger,
      now: () => new Date(t),
    });

  it('folds repeats of one Event into its series', async () => {
    const r = recorder();
    const crash = {
      type: 'Warning',
      reason: 'CrashLoopBackOff',
      action: 'Rollout',
      note: 'exited with code 1',
    } as const;
    for (let i = 0; i < 40; i++) {
      r.record(subject('flappy'), crash);
      t += 1_000;
    }
    await r.flush();
    const list = await eventsAbout('flappy');
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      type: 'Warning',
      reason: 'CrashLoopBackOff',
      reportingController: 'agentplane-operator',
      reportingInstance: 'agentplane-operator-0',
      regarding: { kind: 'AgentDeployment', uid: 'uid-flappy' },
      series: { count: 40 },
    });
    // Long after the series ended, the same Event starts a new object.
    t += 60 * 60_000;
    r.record(subject('flappy'), crash);
    await r.flush();
    expect(await eventsAbout('flappy')).toHaveLength(2);
  });

  it('lets one object have a burst of distinct Events, then one per few minutes', async () => {
    const r = recorder();
    for (let i = 0; i < 100; i++)
      r.record(subject('noisy'), { type: 'Normal', reason: 'Progressing', action: 'Rollout', note: `step ${i}` });
    await r.flush();
    expect(await eventsAbout('noisy')).toHaveLength(25);
    // Another object is not starved by the noisy one.
    r.record(subject('quiet'), { type: 'Normal', reason: 'Ready', action: 'Route', note: 'Serving revision r1.' });
    await r.flush();
    expect(await eventsAbout('quiet')).toHaveLength(1);
    t += 5 * 60_000;
    r.record(subject('noisy'), { type: 'Normal', reason: 'Progressing', action: 'Rollout', note: 'later' });
    await r.flush();
    expect(await eventsAbout('noisy')).toHaveLength(26);
  });

  it("cuts a long note to the API's 1 kB instead of losing the Event", async () => {
    const r = recorder();
    r.record(subject('verbose'), { type: 'Warning', reason: 'BuildFailed', action: 'Build', note: 'é'.repeat(2000) });
    await r.flush();
    const [e] = await eventsAbout('verbose');
    expect(Buffer.byteLength(e!.note!)).toBeLessThanOrEqual(1024);
    expect(e!.note!.endsWith('...')).toBe(true);
  });
});
