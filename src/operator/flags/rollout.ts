// `agentplane operator` flags: what a deployment may ask for, what it gets when it asks for nothing, and when a rollout has failed.
import { runtimeOptions } from './runtime.ts';
import { num } from '../../lib/option-readers.ts';

export const rolloutOptions = runtimeOptions({
  'max-scale': {
    type: 'string',
    description: 'Largest min_scale/max_scale a deployment may ask for',
    default: '10',
    env: ['AGENTPLANE_MAX_SCALE'],
    path: 'runtime.limits.maxScale',
    read: num,
  },
  'max-cpu': {
    type: 'string',
    description: 'Largest cpu/cpu_limit (cores) a deployment may ask for',
    default: '4',
    env: ['AGENTPLANE_MAX_CPU'],
    path: 'runtime.limits.maxCpu',
    read: num,
  },
  'max-memory-mb': {
    type: 'string',
    description: 'Largest memory_mb/memory_limit_mb a deployment may ask for',
    default: '8192',
    env: ['AGENTPLANE_MAX_MEMORY_MB'],
    path: 'runtime.limits.maxMemoryMb',
    read: num,
  },
  'default-cpu': {
    type: 'string',
    description: 'CPU request (cores) when resource_spec has none',
    default: '0.5',
    env: ['AGENTPLANE_DEFAULT_CPU'],
    path: 'runtime.defaults.cpu',
    read: num,
  },
  'default-memory-mb': {
    type: 'string',
    description: 'Memory request (MiB) when resource_spec has none',
    default: '512',
    env: ['AGENTPLANE_DEFAULT_MEMORY_MB'],
    path: 'runtime.defaults.memoryMb',
    read: num,
  },
  'crash-loop-restarts': {
    type: 'string',
    description:
      'Restarts of a crash-looping agent pod before its revision is DEPLOY_FAILED (the progress deadline applies too)',
    default: '5',
    env: ['AGENTPLANE_CRASH_LOOP_RESTARTS'],
    path: 'runtime.crashLoopRestarts',
    read: num,
  },
  'progress-deadline': {
    type: 'string',
    description: 'Seconds a rollout may stall before DEPLOY_FAILED',
    default: '600',
    env: ['AGENTPLANE_PROGRESS_DEADLINE'],
    path: 'runtime.progressDeadlineSeconds',
    read: num,
  },
});
