import { describe, expect, it } from 'vitest';
import { conditionChanged, findCondition, isConditionTrue, setCondition } from '../../src/resources/conditions.ts';
import { deploymentName, isLabelValue, isUuid, makeRevision, revisionName } from '../../src/resources/index.ts';
import { makeDeployment } from '../control-plane/helpers/fixtures.ts';

const t0 = new Date('2026-01-01T00:00:00Z');
const t1 = new Date('2026-01-01T00:05:00Z');

describe('conditions', () => {
  it('lastTransitionTime moves only when the status flips', () => {
    let c = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Building' }, t0);
    expect(c).toEqual([{ type: 'Ready', status: 'False', reason: 'Building', lastTransitionTime: t0.toISOString() }]);
    c = setCondition(c, { type: 'Ready', status: 'False', reason: 'Deploying', message: 'rolling out' }, t1);
    expect(findCondition(c, 'Ready')).toMatchObject({ reason: 'Deploying', lastTransitionTime: t0.toISOString() });
    c = setCondition(c, { type: 'Ready', status: 'True', reason: 'Deployed' }, t1);
    expect(findCondition(c, 'Ready')?.lastTransitionTime).toBe(t1.toISOString());
    expect(isConditionTrue(c, 'Ready')).toBe(true);
    c = setCondition(c, { type: 'Built', status: 'True' }, t1);
    expect(c.map((x) => x.type)).toEqual(['Ready', 'Built']);
  });

  it('conditionChanged tells whether a status write is needed', () => {
    const c = setCondition(undefined, { type: 'Ready', status: 'True', reason: 'Deployed', observedGeneration: 2 }, t0);
    expect(conditionChanged(c, { type: 'Ready', status: 'True', reason: 'Deployed', observedGeneration: 2 })).toBe(
      false,
    );
    expect(conditionChanged(c, { type: 'Ready', status: 'True', reason: 'Deployed', observedGeneration: 3 })).toBe(
      true,
    );
    expect(conditionChanged(c, { type: 'Ready', status: 'False', reason: 'Deployed', observedGeneration: 2 })).toBe(
      true,
    );
    expect(conditionChanged(c, { type: 'Other', status: 'True' })).toBe(true);
  });
});

describe('names and the revision builder', () => {
  it('derives DNS-safe names deterministically', () => {
    const id = '0b8f3c2e-1d4a-4c1e-9a55-2f7d6e8c9b10';
    expect(isUuid(id)).toBe(true);
    expect(isUuid('nope')).toBe(false);
    expect(deploymentName(id)).toBe(`ag-${id}`);
    expect(revisionName(deploymentName(id), 12)).toBe(`ag-${id}-r12`);
    expect(revisionName(deploymentName(id), 99999).length).toBeLessThanOrEqual(63);
    expect(isLabelValue('tenant-a')).toBe(true);
    expect(isLabelValue('bad tenant')).toBe(false);
  });

  it('makeRevision snapshots the deployment with an owner reference and labels', () => {
    const dep = makeDeployment('ns1', 'tenant-x');
    dep.metadata.uid = 'uid-1';
    dep.spec.revisionCounter = 3;
    const rev = makeRevision(dep);
    expect(rev.metadata.name).toBe(`${dep.metadata.name}-r3`);
    expect(rev.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'agentplane.dev/v1alpha1',
        kind: 'AgentDeployment',
        name: dep.metadata.name,
        uid: 'uid-1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(rev.metadata.labels).toMatchObject({
      'agentplane.dev/tenant': 'tenant-x',
      'agentplane.dev/deployment': dep.metadata.name,
      'agentplane.dev/revision-number': '3',
    });
    expect(rev.spec).toMatchObject({
      revisionNumber: 3,
      tenantId: 'tenant-x',
      sourceRevisionConfig: dep.spec.sourceRevisionConfig,
    });
    // A snapshot: later edits of the deployment do not leak into it.
    dep.spec.sourceConfig.resourceSpec!.cpu = 8;
    expect(rev.spec.sourceConfig.resourceSpec!.cpu).toBe(1);
    expect(makeRevision(dep, 1).metadata.name).toBe(`${dep.metadata.name}-r1`);
  });
});
