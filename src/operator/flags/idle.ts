// `agentplane operator` flags: scale to zero: the activator idle deployments are parked behind and how often activity is looked at.
import { runtimeOptions } from './runtime.ts';
import { num } from '../../lib/option-readers.ts';
import { objectRef } from './read.ts';

export const idleOptions = runtimeOptions({
  'activator-service': {
    type: 'string',
    description:
      'NAMESPACE/NAME of the activator Service (agentplane activator): idle deployments (resource_spec.idle_timeout_minutes, min_scale 0) scale to 0 and their Service sends traffic to it; empty: nothing sleeps',
    env: ['AGENTPLANE_ACTIVATOR_SERVICE'],
    path: 'runtime.idle.activator',
    read: objectRef,
  },
  'idle-check-interval': {
    type: 'string',
    description: 'Seconds between looks at awake deployments (idle?) and sleeping ones (due work?)',
    default: '30',
    env: ['AGENTPLANE_IDLE_CHECK_INTERVAL'],
    path: 'runtime.idle.checkSeconds',
    read: num,
  },
  'agent-activity-url': {
    type: 'string',
    description:
      "Where an agent pod is asked for its activity ({ip} and {port}: the pod's); another address sends every such question there",
    default: 'http://{ip}:{port}',
    env: ['AGENTPLANE_AGENT_ACTIVITY_URL'],
    path: 'runtime.idle.podUrl',
  },
});
