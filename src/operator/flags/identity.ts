// `agentplane operator` flags: this replica: leader election, its probe port and its logs.
import { z } from 'zod';
import { defineOptions } from '../../lib/cli-args.ts';
import { kubernetesName } from './read.ts';
import { lower } from '../../lib/option-readers.ts';

export const identityOptions = defineOptions({
  'leader-elect': {
    type: 'string',
    description: 'true: act only while holding the Lease (needed with more than one replica)',
    default: 'false',
    env: ['AGENTPLANE_LEADER_ELECT'],
    path: 'leaderElect',
    schema: z.enum(['true', 'false']).transform((v) => v === 'true'),
  },
  'lease-name': {
    type: 'string',
    description: 'Lease used for leader election',
    default: 'agentplane-operator',
    env: ['AGENTPLANE_LEASE_NAME'],
    path: 'leaseName',
    schema: kubernetesName,
  },
  'lease-namespace': {
    type: 'string',
    description: 'Namespace of the Lease (default: the pod namespace, else --namespace)',
    env: ['POD_NAMESPACE'],
    path: 'leaseNamespace',
    schema: kubernetesName,
  },
  'lease-duration': {
    type: 'string',
    description: 'Seconds a silent leader keeps the Lease',
    default: '15',
    env: ['AGENTPLANE_LEASE_DURATION'],
    path: 'leaseDurationMs',
    schema: z.coerce
      .number()
      .int()
      .min(2)
      .transform((s) => s * 1000),
  },
  identity: {
    type: 'string',
    description: 'Name of this replica in the Lease',
    env: ['POD_NAME'],
    path: 'identity',
    schema: z.string().min(1),
  },
  'health-port': {
    type: 'string',
    description: 'Port of /healthz and /readyz (0: any free port; off: none)',
    default: '8081',
    env: ['AGENTPLANE_HEALTH_PORT'],
    path: 'healthPort',
    schema: z.coerce.number().int().min(0).max(65535).optional(),
    read: (v) => (v === 'off' ? undefined : v),
  },
  'log-level': {
    type: 'string',
    description: 'fatal, error, warn, info, debug, trace or silent',
    default: 'info',
    env: ['LOG_LEVEL'],
    path: 'logLevel',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    read: lower,
  },
});
