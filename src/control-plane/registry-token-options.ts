// The build registry token flags of `control-plane`: with a signing key the control plane hands out push tokens for
// `langgraph deploy` and serves the registry's token endpoint (services/registry-tokens); without one, neither.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { UsageError, type PlainOption } from '../lib/cli-args.ts';
import { registrySignerFromPem, type RegistryTokenOptions } from './services/registry-tokens/index.ts';

export const registryTokenOptions: Record<string, PlainOption> = {
  registry: {
    type: 'string',
    description:
      "The build registry prefix, the operator's --registry (e.g. registry.example.com/agents): push tokens open " +
      "<prefix>/ag-<deployment id>, and a revision's image_uri under it must be its own deployment's repository",
    env: ['AGENTPLANE_REGISTRY'],
  },
  'registry-token-key-file': {
    type: 'string',
    description:
      "PEM private key (EC P-256 or RSA) the control plane signs the build registry's bearer tokens with; the " +
      'registry trusts its certificate (auth.token.rootcertbundle). Turns on push tokens (needs --registry)',
    env: ['AGENTPLANE_REGISTRY_TOKEN_KEY_FILE'],
  },
  'registry-token-issuer': {
    type: 'string',
    description: "The registry's auth.token.issuer (the tokens' iss)",
    default: 'agentplane',
    env: ['AGENTPLANE_REGISTRY_TOKEN_ISSUER'],
  },
  'registry-token-service': {
    type: 'string',
    description: "The registry's auth.token.service (the tokens' aud); default: the registry's host",
    env: ['AGENTPLANE_REGISTRY_TOKEN_SERVICE'],
  },
};

/** The registry prefix and token settings from flags; a missing prefix or an unusable key is a usage error. */
export function registryTokensFrom(
  pick: (name: string) => string | undefined,
  cwd: string,
): { registry?: string; registryTokens?: RegistryTokenOptions } {
  const registry = pick('registry')
    ?.trim()
    .replace(/^[a-z]+:\/\//i, '')
    .replace(/\/+$/, '');
  if (registry !== undefined && (!registry || /\s/.test(registry) || registry.startsWith('/'))) {
    throw new UsageError(
      '--registry: must be a registry host with an optional path (e.g. registry.example.com/agents)',
    );
  }
  const keyFile = pick('registry-token-key-file');
  if (!keyFile) return registry ? { registry } : {};
  if (!registry) {
    throw new UsageError('--registry-token-key-file needs --registry (the build registry prefix push tokens open)');
  }
  let pem: string;
  try {
    pem = readFileSync(path.resolve(cwd, keyFile), 'utf8');
  } catch {
    throw new UsageError(`--registry-token-key-file: cannot read ${keyFile}`);
  }
  let signer: RegistryTokenOptions['signer'];
  try {
    signer = registrySignerFromPem(pem);
  } catch (err) {
    throw new UsageError(`--registry-token-key-file: ${keyFile} ${(err as Error).message}`);
  }
  const issuer = pick('registry-token-issuer') || 'agentplane';
  const service = pick('registry-token-service') || registry.split('/')[0]!;
  return { registry, registryTokens: { signer, issuer, service, registry } };
}
