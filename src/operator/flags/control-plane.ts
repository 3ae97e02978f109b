// `agentplane operator` flags: what the operator asks a control plane for: agent tokens, uploaded sources, clone tokens of a listener.
import { defineOptions } from '../../lib/cli-args.ts';
import { listenerConnectionFields } from '../../api/listener-connection.ts';
import { runtimeOptions } from './runtime.ts';
import { json } from '../../lib/option-readers.ts';

const agentAuthAndFetchOptions = runtimeOptions({
  'control-plane-url': {
    type: 'string',
    description:
      "The control plane's URL as agents reach it: with --deployment-token-key, agents get it and a token for their workspace's auth service",
    env: ['AGENTPLANE_CONTROL_PLANE_URL'],
    path: 'runtime.agentAuth.controlPlaneUrl',
  },
  'deployment-token-key': {
    type: 'string',
    description:
      "Base64 of 32 bytes, the same as the control plane's: signs the deployment tokens agents call the auth service with. Prefer the env var",
    env: ['AGENTPLANE_DEPLOYMENT_TOKEN_KEY'],
    path: 'runtime.agentAuth.tokenKey',
  },
  'source-fetch-url': {
    type: 'string',
    description:
      "The control plane's URL as build pods reach it (e.g. http://agentplane-control-plane.agentplane.svc): builds of " +
      'uploaded source tarballs (langgraph deploy) download them from there, with --source-uploads-key',
    env: ['AGENTPLANE_SOURCE_FETCH_URL'],
    path: 'runtime.sourceFetch.url',
  },
  'source-fetch-peer': {
    type: 'string',
    description:
      'JSON NetworkPolicy peer of the control plane pods (e.g. {"namespaceSelector":{...},"podSelector":{...}}): ' +
      'build pods may connect to it (their egress otherwise skips private ranges)',
    env: ['AGENTPLANE_SOURCE_FETCH_PEER'],
    path: 'runtime.sourceFetch.peer',
    read: json,
  },
  'source-uploads-key': {
    type: 'string',
    description:
      "Base64 of 32 bytes, the same as the control plane's: signs the fetch token each tarball build gets (one " +
      'revision, its tarball, until the build times out). Prefer the env var',
    env: ['AGENTPLANE_SOURCE_UPLOADS_KEY'],
    path: 'runtime.sourceFetch.tokenKey',
  },
});

/** A data-plane-only install's listener: checked as `agentplane listener` checks its own. */
const listenerOptions = defineOptions({
  'listener-control-plane-url': {
    type: 'string',
    description:
      'Data-plane-only install: the control plane a listener connects to; builds of integration_id deployments ask it for a clone token (with the four --listener-* settings)',
    env: ['AGENTPLANE_LISTENER_CONTROL_PLANE_URL'],
    path: 'listener.controlPlaneUrl',
    schema: listenerConnectionFields.controlPlaneUrl,
  },
  'listener-tenant': {
    type: 'string',
    description: 'Data-plane-only install: workspace (tenant) id of the listener',
    env: ['AGENTPLANE_LISTENER_TENANT'],
    path: 'listener.tenant',
    schema: listenerConnectionFields.tenant,
  },
  'listener-id': {
    type: 'string',
    description: 'Data-plane-only install: id of the listener record',
    env: ['AGENTPLANE_LISTENER_ID'],
    path: 'listener.listenerId',
    schema: listenerConnectionFields.listenerId,
  },
  'listener-api-key': {
    type: 'string',
    description: "Data-plane-only install: the listener's key. Prefer the env var",
    env: ['AGENTPLANE_LISTENER_API_KEY'],
    path: 'listener.apiKey',
    schema: listenerConnectionFields.apiKey,
  },
});

export const controlPlaneOptions = { ...agentAuthAndFetchOptions, ...listenerOptions };
