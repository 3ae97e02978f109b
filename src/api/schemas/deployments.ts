// Request bodies of the Deployments v2 API (create, patch) and their parts: source configs, resource spec, secrets
// and secret references (snake_case, as the public API). The same schemas validate requests and feed /openapi.json.
import { z } from 'zod';
import { objectPathProblem } from '../object-path.ts';
import { reservedEnvName } from '../../lib/reserved-env.ts';
import { customUrlHost, isDnsSubdomain, MAX_IDLE_TIMEOUT_MINUTES } from '../../resources/index.ts';
import {
  ENV_NAME,
  MAX_ANNOTATIONS_BYTES,
  MAX_SECRET_NAME,
  MAX_SECRET_VALUE_BYTES,
  MAX_SECRETS_BYTES,
  controlCharProblem,
  gitRefProblem,
  hasNul,
  imageUriProblem,
  labelKeyProblem,
  labelValueProblem,
  relativePathProblem,
  repoUrlProblem,
  utf8Bytes,
} from '../input-rules.ts';

/** A zod check from a rule that returns a problem message (or undefined). */
const rule =
  (problem: (v: string) => string | undefined) =>
  (v: string, ctx: z.RefinementCtx): void => {
    const p = problem(v);
    if (p) ctx.addIssue({ code: 'custom', message: p });
  };

const dnsName = (what: string) =>
  rule((v) => (isDnsSubdomain(v) ? undefined : `must be a Kubernetes ${what} name (DNS subdomain)`));

/**
 * Label-like maps: every key a qualified name, every value a label value (labels, node_selector). Issues sit on the
 * map and name the key in the message: keys may hold "/", which the 422 `loc` (split on "/") cannot carry.
 */
const labelMap = (what: string) =>
  z.record(z.string(), z.string()).superRefine((m, ctx) => {
    for (const [k, v] of Object.entries(m)) {
      const keyProblem = labelKeyProblem(k);
      if (keyProblem) ctx.addIssue({ code: 'custom', message: `${what} key ${keyProblem}` });
      const valueProblem = labelValueProblem(v);
      if (valueProblem) ctx.addIssue({ code: 'custom', message: `${what} "${k}": value ${valueProblem}` });
    }
  });

const annotationMap = z.record(z.string(), z.string()).superRefine((m, ctx) => {
  let total = 0;
  for (const [k, v] of Object.entries(m)) {
    const keyProblem = labelKeyProblem(k);
    if (keyProblem) ctx.addIssue({ code: 'custom', message: `annotation key ${keyProblem}` });
    total += utf8Bytes(k) + utf8Bytes(v);
  }
  if (total > MAX_ANNOTATIONS_BYTES) {
    ctx.addIssue({
      code: 'custom',
      message: `annotations must total at most ${MAX_ANNOTATIONS_BYTES} bytes (keys and values), got ${total}`,
    });
  }
});

export const ResourceSpecApi = z
  .object({
    min_scale: z.number().int().min(0).optional(),
    max_scale: z.number().int().min(0).optional(),
    /** CPU cores; Kubernetes counts in millicores, so 0.001 is the smallest amount. */
    cpu: z.number().min(0.001).optional(),
    cpu_limit: z.number().min(0.001).optional(),
    memory_mb: z.number().int().positive().optional(),
    memory_limit_mb: z.number().int().positive().optional(),
    labels: labelMap('label').optional(),
    annotations: annotationMap.optional(),
    service_account_name: z.string().superRefine(dnsName('ServiceAccount')).optional(),
    image_pull_secrets: z.array(z.string().superRefine(dnsName('Secret'))).optional(),
    node_selector: labelMap('node_selector').optional(),
    /** Minutes without requests, runs or due crons before the agent server sleeps (0: never; unset: by type). */
    idle_timeout_minutes: z.number().int().min(0).max(MAX_IDLE_TIMEOUT_MINUTES).optional(),
  })
  .superRefine((r, ctx) => {
    // A replica kept up on purpose and one that goes to sleep: say which wins instead of guessing.
    if ((r.min_scale ?? 0) >= 1 && (r.idle_timeout_minutes ?? 0) > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['idle_timeout_minutes'],
        message: `idle_timeout_minutes (${r.idle_timeout_minutes}) needs min_scale 0 or unset: min_scale ${r.min_scale} keeps the agent server running`,
      });
    }
    const relation = (low: keyof typeof r, high: keyof typeof r) => {
      const a = r[low];
      const b = r[high];
      if (typeof a === 'number' && typeof b === 'number' && a > b) {
        ctx.addIssue({ code: 'custom', path: [high], message: `${low} (${a}) must not exceed ${high} (${b})` });
      }
    };
    relation('min_scale', 'max_scale');
    relation('cpu', 'cpu_limit');
    relation('memory_mb', 'memory_limit_mb');
  });
export type ResourceSpecApi = z.infer<typeof ResourceSpecApi>;

export const SourceConfigIn = z.object({
  integration_id: z.string().nullable().optional(),
  repo_url: z.string().min(1).max(2048).superRefine(rule(repoUrlProblem)).nullable().optional(),
  /** dev_zero (what `langgraph deploy` sends by default: a scale-to-zero dev deployment) is kept as dev. */
  deployment_type: z
    .enum(['dev', 'prod', 'dev_zero'])
    .transform((t) => (t === 'dev_zero' ? 'dev' : t))
    .optional(),
  build_on_push: z.boolean().optional(),
  /** An http(s) URL or a bare host; its host must be free and under an allowed custom domain (checked by the service). */
  custom_url: z
    .string()
    .max(2048)
    .superRefine(
      rule((v) => {
        const r = customUrlHost(v);
        return 'problem' in r ? r.problem : undefined;
      }),
    )
    .nullable()
    .optional(),
  resource_spec: ResourceSpecApi.nullable().optional(),
  listener_id: z.string().nullable().optional(),
  listener_config: z.object({ k8s_namespace: z.string().optional() }).nullable().optional(),
  install_command: z.string().nullable().optional(),
  build_command: z.string().nullable().optional(),
  /** api_key (default): callers of the agent need an API key of the workspace; public: anyone may call it. */
  access_mode: z.enum(['api_key', 'public']).optional(),
});
export type SourceConfigIn = z.infer<typeof SourceConfigIn>;

export const SourceRevisionConfigIn = z.object({
  repo_ref: z.string().min(1).superRefine(rule(gitRefProblem)).nullable().optional(),
  graph_config_path: z.string().min(1).superRefine(rule(relativePathProblem)).nullable().optional(),
  /** Alias of graph_config_path used by the public API. */
  langgraph_config_path: z.string().min(1).superRefine(rule(relativePathProblem)).nullable().optional(),
  image_uri: z.string().min(1).superRefine(rule(imageUriProblem)).nullable().optional(),
  /** internal_source: the object_path an upload URL named (POST /v2/deployments/{id}/upload-url). */
  source_tarball_path: z.string().min(1).max(200).superRefine(rule(objectPathProblem)).nullable().optional(),
});
export type SourceRevisionConfigIn = z.infer<typeof SourceRevisionConfigIn>;

/** A variable of the agent's environment; names the loader, shells or Node obey before its code runs are refused. */
const envName = z
  .string()
  .max(MAX_SECRET_NAME)
  .regex(ENV_NAME, 'must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)')
  .superRefine(rule(reservedEnvName));

export const SecretIn = z.object({ name: envName, value: z.string() }).superRefine((s, ctx) => {
  if (hasNul(s.value)) {
    ctx.addIssue({
      code: 'custom',
      path: ['value'],
      message: `secret "${s.name}": the value must not contain NUL characters`,
    });
  }
  const bytes = utf8Bytes(s.value);
  if (bytes > MAX_SECRET_VALUE_BYTES) {
    ctx.addIssue({
      code: 'custom',
      path: ['value'],
      message: `secret "${s.name}": the value is ${bytes} bytes, more than the ${MAX_SECRET_VALUE_BYTES} allowed`,
    });
  }
});

export const SecretReferenceApi = z.object({
  name: envName,
  secret_name: z.string().min(1).superRefine(dnsName('Secret')),
  secret_key: z
    .string()
    .min(1)
    .max(253)
    .regex(/^[-._a-zA-Z0-9]+$/, 'must be a Secret key (letters, digits, "-", "_", ".")'),
});

const uniqueNames = (list: { name: string }[] | undefined, ctx: z.RefinementCtx, field: string) => {
  const seen = new Set<string>();
  list?.forEach((s, i) => {
    if (seen.has(s.name)) {
      ctx.addIssue({ code: 'custom', path: [field, i, 'name'], message: `duplicate name "${s.name}"` });
    }
    seen.add(s.name);
  });
};

/** Rules over the whole body: the secrets' total size, and no NUL in any string (commands included). */
const bodyRules = (b: { secrets?: { name: string; value: string }[] }, ctx: z.RefinementCtx) => {
  const refs = (b as { secret_references?: { name: string }[] }).secret_references;
  uniqueNames(b.secrets, ctx, 'secrets');
  uniqueNames(refs, ctx, 'secret_references');
  // One environment: a variable comes from a value or from a reference, not both.
  const valued = new Set(b.secrets?.map((s) => s.name));
  refs?.forEach((r, i) => {
    if (valued.has(r.name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['secret_references', i, 'name'],
        message: `"${r.name}" is also in secrets: a variable comes from one place`,
      });
    }
  });
  let total = 0;
  b.secrets?.forEach((s, i) => {
    total += utf8Bytes(s.name) + utf8Bytes(s.value);
    if (total > MAX_SECRETS_BYTES && total - utf8Bytes(s.name) - utf8Bytes(s.value) <= MAX_SECRETS_BYTES) {
      ctx.addIssue({
        code: 'custom',
        path: ['secrets', i, 'value'],
        message: `secret "${s.name}" brings the secrets to more than ${MAX_SECRETS_BYTES} bytes in all`,
      });
    }
  });
  const walk = (v: unknown, path: (string | number)[]): void => {
    if (typeof v === 'string') {
      if (hasNul(v)) ctx.addIssue({ code: 'custom', path, message: 'must not contain NUL characters' });
    } else if (Array.isArray(v)) {
      for (const [i, x] of v.entries()) walk(x, [...path, i]);
    } else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (hasNul(k)) ctx.addIssue({ code: 'custom', path, message: 'keys must not contain NUL characters' });
        // Secret values have their own rule (which names the secret).
        if (!(path.length === 2 && path[0] === 'secrets' && k === 'value')) walk(x, [...path, k]);
      }
    }
  };
  walk(b, []);
};

// Answered exactly as given (a client comparing what it sent, such as Terraform, must see the same name back), so
// surrounding whitespace is refused rather than trimmed away.
const displayName = z
  .string()
  .min(1)
  .max(255)
  .refine((v) => v.trim() === v, 'must not start or end with whitespace')
  .refine((v) => v.trim() !== '', 'must not be blank')
  .superRefine(rule(controlCharProblem));

export const DeploymentCreate = z
  .object({
    name: displayName,
    source: z.enum(['github', 'external_docker', 'internal_source', 'internal_docker']),
    source_config: SourceConfigIn.default({}),
    source_revision_config: SourceRevisionConfigIn.default({}),
    secrets: z.array(SecretIn).default([]),
    secret_references: z.array(SecretReferenceApi).default([]),
  })
  .superRefine((b, ctx) => {
    const src = b.source_revision_config;
    if (b.source === 'github') {
      if (!b.source_config.repo_url) {
        ctx.addIssue({ code: 'custom', path: ['source_config', 'repo_url'], message: 'required for source github' });
      }
      if (!src.repo_ref) {
        ctx.addIssue({
          code: 'custom',
          path: ['source_revision_config', 'repo_ref'],
          message: 'required for source github',
        });
      }
    } else if (b.source === 'internal_source') {
      // The tarball comes later (upload URL, then a PATCH naming it), as `langgraph deploy` does it.
      if (b.source_config.repo_url) {
        ctx.addIssue({
          code: 'custom',
          path: ['source_config', 'repo_url'],
          message: 'must not be set for source internal_source (its code is an uploaded tarball)',
        });
      }
      if (src.source_tarball_path) {
        ctx.addIssue({
          code: 'custom',
          path: ['source_revision_config', 'source_tarball_path'],
          message: 'an upload belongs to an existing deployment: create it, then upload and PATCH the object_path',
        });
      }
    } else if (b.source === 'internal_docker') {
      // The image comes later (a push token, a push to the deployment's repository, then a PATCH naming it).
      if (b.source_config.repo_url) {
        ctx.addIssue({
          code: 'custom',
          path: ['source_config', 'repo_url'],
          message: 'must not be set for source internal_docker (its code is an image pushed to the platform registry)',
        });
      }
      if (b.source_config.listener_id) {
        // Push tokens open this control plane's build registry, which a listener's cluster does not pull from.
        ctx.addIssue({
          code: 'custom',
          path: ['source_config', 'listener_id'],
          message:
            "must not be set for source internal_docker (its image goes to this platform's build registry): push to a " +
            "registry the listener's cluster pulls from and create an external_docker deployment",
        });
      }
      if (src.image_uri) {
        ctx.addIssue({
          code: 'custom',
          path: ['source_revision_config', 'image_uri'],
          message:
            "an internal_docker image is pushed to an existing deployment's repository: create it, then ask for a " +
            'push token (POST /v2/deployments/{id}/push-token), push, and PATCH the image_uri',
        });
      }
    } else if (!src.image_uri) {
      ctx.addIssue({
        code: 'custom',
        path: ['source_revision_config', 'image_uri'],
        message: 'required for source external_docker',
      });
    }
    if (b.source_config.build_on_push && src.repo_ref?.startsWith('refs/tags/')) {
      ctx.addIssue({
        code: 'custom',
        path: ['source_config', 'build_on_push'],
        message: 'must be false when repo_ref is a tag (refs/tags/...)',
      });
    }
    bodyRules(b, ctx);
  });
export type DeploymentCreate = z.infer<typeof DeploymentCreate>;

export const DeploymentPatch = z
  .object({
    name: displayName.optional(),
    source: z.enum(['github', 'external_docker', 'internal_source']).optional(),
    /** What `langgraph deploy` calls the source of the revision it asks for; must be the deployment's source. */
    revision_source: z.enum(['github', 'external_docker', 'internal_source', 'internal_docker']).optional(),
    source_config: SourceConfigIn.optional(),
    source_revision_config: SourceRevisionConfigIn.optional(),
    secrets: z.array(SecretIn).optional(),
    secret_references: z.array(SecretReferenceApi).optional(),
    /**
     * Package names `langgraph deploy` found in the project, for the hosted platform's dependency tracking; accepted
     * (bounded) so the CLI's request validates, and not stored: nothing here reads them.
     */
    tracked_packages: z.array(z.string().max(214)).max(1000).optional(),
  })
  .superRefine((b, ctx) => bodyRules(b, ctx));
export type DeploymentPatch = z.infer<typeof DeploymentPatch>;
