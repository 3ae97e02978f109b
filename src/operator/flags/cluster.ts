// `agentplane operator` flags: where the operator works: its namespace and the cluster it talks to.
import { z } from 'zod';
import { defineOptions } from '../../lib/cli-args.ts';
import { kubernetesName } from './read.ts';

export const clusterOptions = defineOptions({
  namespace: {
    type: 'string',
    description: 'Namespace of the AgentDeployments and of everything built for them',
    default: 'default',
    env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
    path: 'namespace',
    schema: kubernetesName,
  },
  kubeconfig: {
    type: 'string',
    description: 'Kubeconfig file; without it: in-cluster config, else the default kubeconfig',
    env: ['KUBECONFIG'],
    path: 'kubeconfig',
    schema: z.string().optional(),
  },
});
