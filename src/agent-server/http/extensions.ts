// What langgraph.json adds to the HTTP server besides graphs: custom auth ("auth"), custom routes and HTTP
// settings ("http"). Loaded once per process; keys this server does not act on are logged once as ignored.
import path from 'node:path';
import type { Logger } from '../../lib/logger.ts';
import { loadCustomAuth, type CustomAuth } from '../auth/custom.ts';
import { ignoredConfigKeys, readLanggraphJson, type LanggraphJson } from '../graphs/config.ts';
import type { CorsConfig } from './cors.ts';
import { loadCustomApp, type CustomApp } from './custom-app.ts';

export type HttpSettings = NonNullable<LanggraphJson['http']>;

/** langgraph.json auth.openapi: the security schemes and requirements /openapi.json declares. */
export type AuthOpenApi = NonNullable<NonNullable<LanggraphJson['auth']>['openapi']>;

export interface ServerExtensions {
  auth: CustomAuth | null;
  app: CustomApp | null;
  http: HttpSettings;
  cors: CorsConfig | undefined;
  openapi?: AuthOpenApi;
}

export async function loadServerExtensions(configPath: string, logger: Logger): Promise<ServerExtensions> {
  const abs = path.resolve(configPath);
  const projectDir = path.dirname(abs);
  const json = await readLanggraphJson(abs);
  const ignored = ignoredConfigKeys(json);
  if (ignored.length) {
    logger.warn({ config: abs, keys: ignored }, `langgraph.json keys ignored by this server: ${ignored.join(', ')}`);
  }
  const http = json.http ?? {};
  let auth: CustomAuth | null = null;
  if (json.auth?.path) {
    auth = await loadCustomAuth(json.auth.path, projectDir);
    logger.info({ auth: json.auth.path, authenticate: auth.hasAuthenticate }, 'custom auth loaded');
  }
  if (json.auth?.disable_studio_auth !== undefined) {
    // Studio users are never trusted by header here (no LangSmith to verify them), so the switch changes nothing.
    logger.info(
      { disable_studio_auth: json.auth.disable_studio_auth },
      'auth.disable_studio_auth accepted: Studio requests always go through authenticate',
    );
  }
  let app: CustomApp | null = null;
  if (http.app) {
    app = await loadCustomApp(http.app, projectDir);
    logger.info({ app: http.app }, 'custom HTTP app loaded');
  }
  return { auth, app, http, cors: http.cors, ...(json.auth?.openapi ? { openapi: json.auth.openapi } : {}) };
}
