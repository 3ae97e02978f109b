// How the operator's API-request metric names a request: the verb and resource an audit log or an RBAC rule would.
import { describe, expect, it } from 'vitest';
import { requestKind } from '../../src/operator/kube-requests.ts';

const base = 'https://10.0.0.1:6443';

describe('requestKind', () => {
  it.each([
    ['GET', '/api/v1/namespaces/agents/secrets?labelSelector=a%3Db', 'list', 'secrets'],
    ['GET', '/api/v1/namespaces/agents/secrets/x-env', 'get', 'secrets'],
    ['GET', '/api/v1/namespaces/agents/pods/p/log?container=build', 'get', 'pods/log'],
    ['GET', '/apis/apps/v1/replicasets?watch=true', 'watch', 'replicasets'],
    ['GET', '/api/v1/namespaces/agents', 'get', 'namespaces'],
    ['GET', '/api/v1/namespaces', 'list', 'namespaces'],
    ['POST', '/apis/batch/v1/namespaces/agents/jobs', 'create', 'jobs'],
    [
      'PUT',
      '/apis/agentplane.dev/v1alpha1/namespaces/agents/agentrevisions/r1/status',
      'update',
      'agentrevisions/status',
    ],
    ['PATCH', '/apis/apps/v1/namespaces/agents/deployments/d', 'patch', 'deployments'],
    ['DELETE', '/api/v1/namespaces/agents/secrets/x', 'delete', 'secrets'],
    ['DELETE', '/api/v1/namespaces/agents/secrets', 'deletecollection', 'secrets'],
    [
      'GET',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/agentdeployments.agentplane.dev',
      'get',
      'customresourcedefinitions',
    ],
    ['GET', '/version', 'get', 'other'],
  ])('%s %s is %s %s', (method, path, verb, resource) => {
    expect(requestKind(method, `${base}${path}`)).toEqual({ verb, resource });
  });
});
