// `agentplane operator` flags: the Postgres a deployment without DATABASE_URI gets.
import { runtimeOptions } from './runtime.ts';

export const postgresOptions = runtimeOptions({
  'postgres-mode': {
    type: 'string',
    description: 'auto: own Postgres StatefulSet for deployments without DATABASE_URI; external: require DATABASE_URI',
    default: 'auto',
    env: ['AGENTPLANE_POSTGRES_MODE'],
    path: 'runtime.postgres.mode',
  },
  'postgres-image': {
    type: 'string',
    description: 'Image of per-deployment Postgres',
    default: 'postgres:16-alpine',
    env: ['AGENTPLANE_POSTGRES_IMAGE'],
    path: 'runtime.postgres.image',
  },
  'postgres-storage': {
    type: 'string',
    description: 'PVC size of per-deployment Postgres',
    default: '1Gi',
    env: ['AGENTPLANE_POSTGRES_STORAGE'],
    path: 'runtime.postgres.storageSize',
  },
  'postgres-storage-class': {
    type: 'string',
    description: 'StorageClass of per-deployment Postgres',
    env: ['AGENTPLANE_POSTGRES_STORAGE_CLASS'],
    path: 'runtime.postgres.storageClassName',
  },
});
