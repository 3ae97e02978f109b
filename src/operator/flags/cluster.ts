// `agentplane operator` flags: where the operator works: its namespace and the cluster it talks to.
import type { OptionSpec } from '../../lib/cli-args.ts';

export const clusterOptions: Record<string, OptionSpec> = {
  namespace: {
    type: 'string',
    description: 'Namespace of the AgentDeployments and of everything built for them',
    default: 'default',
    env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
    path: 'namespace',
  },
  kubeconfig: {
    type: 'string',
    description: 'Kubeconfig file; without it: in-cluster config, else the default kubeconfig',
    env: ['KUBECONFIG'],
    path: 'kubeconfig',
  },
};
