// `agentplane operator` flags, each declared once in flags/<concern>.ts with the env var the Helm chart sets, the path
// of its value in OperatorConfig, its schema (a runtime flag's is its path's in the runtime's schema) and how its text
// is read: config.ts parses them, `agentplane operator --help` and
// docs/kubernetes.md's flag table (npm run gen:docs) are made from them.
import { defineCommand } from '../lib/cli-args.ts';
import { githubAppOptions } from '../git/github-config.ts';
import { clusterOptions } from './flags/cluster.ts';
import { buildOptions } from './flags/build.ts';
import { routingOptions } from './flags/routing.ts';
import { networkingOptions } from './flags/networking.ts';
import { rolloutOptions } from './flags/rollout.ts';
import { idleOptions } from './flags/idle.ts';
import { tenantsOptions } from './flags/tenants.ts';
import { postgresOptions } from './flags/postgres.ts';
import { identityOptions } from './flags/identity.ts';
import { controlPlaneOptions } from './flags/control-plane.ts';

export const operatorCommand = defineCommand({
  name: 'operator',
  summary: 'Reconcile AgentDeployment/AgentRevision custom resources into build Jobs and agent-server Deployments',
  usage: 'agentplane operator [--namespace NS] [--kubeconfig FILE] [--registry REPO] [--push-secret NAME] [options]',
  options: {
    ...clusterOptions,
    ...buildOptions,
    ...routingOptions,
    ...networkingOptions,
    ...rolloutOptions,
    ...idleOptions,
    ...tenantsOptions,
    ...postgresOptions,
    ...identityOptions,
    ...controlPlaneOptions,
    ...githubAppOptions,
  },
});
