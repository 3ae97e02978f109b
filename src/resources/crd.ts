// CustomResourceDefinitions generated from the zod schemas, so crds/ can never drift from the code
// (`npm run gen:crds` writes them; a test fails when the files differ). zod's OpenAPI 3.0 output is close to a
// structural schema; this adapts the rest: no $schema, no additionalProperties:false, no propertyNames, const as a
// one-value enum, and no safe-integer bounds.
import { z } from 'zod';
import { agentDeploymentSpecSchema, agentDeploymentStatusSchema } from './agent-deployment.ts';
import { agentRevisionSpecSchema, agentRevisionStatusSchema } from './agent-revision.ts';
import { GROUP, VERSION } from './meta.ts';
import { DEPLOYMENT_NAME_MAX, DEPLOYMENT_NAME_PATTERN } from './names.ts';

type Json = Record<string, unknown>;

function structural(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(structural);
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === '$schema' || k === 'propertyNames') continue;
    if (k === 'additionalProperties' && v === false) continue;
    if ((k === 'maximum' && v === Number.MAX_SAFE_INTEGER) || (k === 'minimum' && v === Number.MIN_SAFE_INTEGER))
      continue;
    if (k === 'const') {
      out.enum = [v];
      continue;
    }
    out[k] = structural(v);
  }
  return out;
}

function toSchema(schema: z.ZodType): Json {
  return structural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' })) as Json;
}

type KindDef = {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: z.ZodType;
  status: z.ZodType;
  immutableSpec: boolean;
  /** Restrictions on metadata.name (the only metadata field a CRD schema may restrict). */
  name?: Json;
  columns: Json[];
};

const KINDS: KindDef[] = [
  {
    kind: 'AgentDeployment',
    plural: 'agentdeployments',
    singular: 'agentdeployment',
    shortNames: ['agdep'],
    spec: agentDeploymentSpecSchema,
    status: agentDeploymentStatusSchema,
    immutableSpec: false,
    // Children take their names from it: a name that cannot give a valid Service is refused at the door.
    name: { type: 'string', maxLength: DEPLOYMENT_NAME_MAX, pattern: DEPLOYMENT_NAME_PATTERN },
    columns: [
      { name: 'Name', type: 'string', jsonPath: '.spec.displayName' },
      { name: 'Tenant', type: 'string', jsonPath: '.spec.tenantId', priority: 1 },
      // Ready's own words: the phase said READY while an older revision served and Ready was False.
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason' },
      { name: 'Revision', type: 'string', jsonPath: '.status.activeRevisionName' },
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', priority: 1 },
      { name: 'URL', type: 'string', jsonPath: '.status.url', priority: 1 },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ],
  },
  {
    kind: 'AgentRevision',
    plural: 'agentrevisions',
    singular: 'agentrevision',
    shortNames: ['agrev'],
    spec: agentRevisionSpecSchema,
    status: agentRevisionStatusSchema,
    immutableSpec: true,
    columns: [
      { name: 'Deployment', type: 'string', jsonPath: '.spec.deploymentName', priority: 1 },
      { name: 'Status', type: 'string', jsonPath: '.status.phase' },
      { name: 'Revision', type: 'integer', jsonPath: '.spec.revisionNumber' },
      { name: 'Image', type: 'string', jsonPath: '.status.image' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ],
  },
];

export type CrdFile = { file: string; crd: Json };

/**
 * Revision of the CRDs' schemas, written on each CRD as the annotation below. Raise it whenever a change to the
 * schemas in src/resources is one the operator relies on: an operator refuses to start against older CRDs
 * (helm upgrade never changes them; see docs/kubernetes.md#upgrading). CRDs without the annotation are revision 0.
 */
export const CRD_REVISION = 1;
export const CRD_REVISION_ANNOTATION = 'agentplane.dev/crd-revision';

export function buildCrds(): CrdFile[] {
  return KINDS.map((k) => {
    const spec = toSchema(k.spec);
    if (k.immutableSpec) spec['x-kubernetes-validations'] = [{ rule: 'self == oldSelf', message: 'spec is immutable' }];
    return {
      file: `${k.plural}.yaml`,
      crd: {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: {
          name: `${k.plural}.${GROUP}`,
          labels: { 'app.kubernetes.io/part-of': 'agentplane' },
          annotations: { [CRD_REVISION_ANNOTATION]: String(CRD_REVISION) },
        },
        spec: {
          group: GROUP,
          scope: 'Namespaced',
          names: {
            kind: k.kind,
            listKind: `${k.kind}List`,
            plural: k.plural,
            singular: k.singular,
            shortNames: k.shortNames,
            categories: ['agentplane'],
          },
          versions: [
            {
              name: VERSION,
              served: true,
              storage: true,
              subresources: { status: {} },
              additionalPrinterColumns: k.columns,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  required: ['spec'],
                  properties: {
                    apiVersion: { type: 'string' },
                    kind: { type: 'string' },
                    metadata: k.name ? { type: 'object', properties: { name: k.name } } : { type: 'object' },
                    spec,
                    status: toSchema(k.status),
                  },
                },
              },
            },
          ],
        },
      },
    };
  });
}
