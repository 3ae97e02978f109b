// A deployment's own Postgres (when the user gave no DATABASE_URI): a one-replica StatefulSet with a PVC from
// volumeClaimTemplates, a headless Service and a Secret holding the password and the connection URI.
import type { V1Secret, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { serviceHost, type KubernetesRuntimeConfig } from './config.ts';
import { fitName } from '../../../resources/names.ts';
import { childMeta, selectorLabels, type Target } from './labels.ts';

export const POSTGRES_URI_KEY = 'uri';
const USER = 'agent';
/** The `postgres` user of the official alpine images (`postgres:*-alpine`). */
export const POSTGRES_UID = 70;
const RESTRICTED = {
  allowPrivilegeEscalation: false,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' as const },
};
const DB = 'agent';

/**
 * `<name>-postgres`, its base cut (with a hash) to 43 characters: the StatefulSet's pods carry its name plus a
 * revision hash (`<sts>-<10>`) as a label value, which must stay within 63.
 */
export function postgresName(target: Target): string {
  return `${fitName(target.name, 43)}-postgres`;
}

export function postgresSecretName(target: Target): string {
  return postgresName(target);
}

/** The password is an input (made once by the runtime) so the builder stays pure. */
export function makePostgresSecret(
  target: Target,
  password: string,
  config: Pick<KubernetesRuntimeConfig, 'clusterDomain'>,
): V1Secret {
  const host = serviceHost(postgresName(target), target.namespace, config);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: childMeta(target, postgresSecretName(target), 'database'),
    type: 'Opaque',
    stringData: {
      password,
      [POSTGRES_URI_KEY]: `postgresql://${USER}:${encodeURIComponent(password)}@${host}:5432/${DB}`,
    },
  };
}

// Until the database answers: a new Postgres takes a while (volume provisioning, initdb), and an agent server
// started before it would crash-loop.
const WAIT_SCRIPT = `until pg_isready -q -h "$PGHOST" -p 5432 -t 2; do echo "waiting for $PGHOST:5432"; sleep 2; done`;

/** Init container of agent pods using the deployment's own Postgres: waits until it accepts connections. */
export function waitForPostgres(target: Target, config: KubernetesRuntimeConfig) {
  return {
    name: 'wait-for-postgres',
    image: config.postgres.image,
    command: ['sh', '-c', WAIT_SCRIPT],
    env: [{ name: 'PGHOST', value: serviceHost(postgresName(target), target.namespace, config) }],
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
    // 70: the postgres user of the official images.
    securityContext: { ...RESTRICTED, runAsUser: POSTGRES_UID, runAsGroup: POSTGRES_UID },
  };
}

export function makePostgresService(target: Target): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMeta(target, postgresName(target), 'database'),
    spec: {
      clusterIP: 'None',
      selector: selectorLabels(target, 'database'),
      ports: [{ name: 'postgres', port: 5432, targetPort: 'postgres', protocol: 'TCP' }],
    },
  };
}

export function makePostgresStatefulSet(target: Target, config: KubernetesRuntimeConfig): V1StatefulSet {
  const meta = childMeta(target, postgresName(target), 'database');
  const ready = { exec: { command: ['pg_isready', '-U', USER, '-d', DB] }, periodSeconds: 10, timeoutSeconds: 5 };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: meta,
    spec: {
      serviceName: postgresName(target),
      replicas: 1,
      // The data goes with the deployment: PVCs from the claim template are not owned by the AgentDeployment.
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete', whenScaled: 'Retain' },
      selector: { matchLabels: selectorLabels(target, 'database') },
      template: {
        metadata: { labels: meta.labels },
        spec: {
          // The agent connects as a superuser (COPY ... TO PROGRAM runs commands here): no API token to find.
          automountServiceAccountToken: false,
          // Pod Security `restricted`: Postgres runs as its own user (the entrypoint supports a non-root start; the
          // data folder is a subfolder it creates on the volume, which fsGroup makes writable).
          securityContext: {
            runAsNonRoot: true,
            runAsUser: POSTGRES_UID,
            runAsGroup: POSTGRES_UID,
            fsGroup: POSTGRES_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'postgres',
              image: config.postgres.image,
              ports: [{ name: 'postgres', containerPort: 5432, protocol: 'TCP' }],
              env: [
                { name: 'POSTGRES_USER', value: USER },
                { name: 'POSTGRES_DB', value: DB },
                {
                  name: 'POSTGRES_PASSWORD',
                  valueFrom: { secretKeyRef: { name: postgresSecretName(target), key: 'password' } },
                },
                // A subfolder: the volume's root holds lost+found on many storage classes.
                { name: 'PGDATA', value: '/var/lib/postgresql/data/pgdata' },
              ],
              readinessProbe: { ...ready, initialDelaySeconds: 5 },
              livenessProbe: { ...ready, initialDelaySeconds: 30, failureThreshold: 6 },
              resources: { requests: { cpu: '100m', memory: '256Mi' } },
              securityContext: RESTRICTED,
              volumeMounts: [{ name: 'data', mountPath: '/var/lib/postgresql/data' }],
            },
          ],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: meta.labels },
          spec: {
            accessModes: ['ReadWriteOnce'],
            ...(config.postgres.storageClassName ? { storageClassName: config.postgres.storageClassName } : {}),
            resources: { requests: { storage: config.postgres.storageSize } },
          },
        },
      ],
    },
  };
}
