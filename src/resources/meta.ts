// Kubernetes-shaped object metadata and conditions, shared by both kinds. The store fills uid, resourceVersion,
// generation and creationTimestamp; callers leave them out on create.
import { z } from 'zod';

export const GROUP = 'agentplane.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;

export const ownerReferenceSchema = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().optional(),
  blockOwnerDeletion: z.boolean().optional(),
});
export type OwnerReference = z.infer<typeof ownerReferenceSchema>;

export const objectMetaSchema = z.object({
  name: z.string(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().int().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  finalizers: z.array(z.string()).optional(),
  ownerReferences: z.array(ownerReferenceSchema).optional(),
});
export type ObjectMeta = z.infer<typeof objectMetaSchema>;

export const conditionStatusSchema = z.enum(['True', 'False', 'Unknown']);

export const conditionSchema = z.object({
  type: z.string().min(1),
  status: conditionStatusSchema,
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int().optional(),
});
export type Condition = z.infer<typeof conditionSchema>;
