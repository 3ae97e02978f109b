// Generative UI: langgraph.json `"ui": {"<graph id>": "./src/ui.tsx"}` names a module whose default export maps
// component names to React components. At start each is bundled with esbuild for the browser, the way the
// platform does it, so that `LoadExternalComponent` (@langchain/langgraph-sdk/react-ui) can load it from this
// server: an IIFE that assigns `{render(name, shadowRootId)}` to a global, with React, the SDK and the modules named
// in `"ui_config": {"shared": [...]}` left external and taken at run time from the page (the
// `Symbol.for("LGUI_REQUIRE")` function that `bootstrapUiContext()` installs). CSS the components import becomes
// a stylesheet next to the script. Tailwind is not run.
import path from 'node:path';
import type { Plugin } from 'esbuild';
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import { GraphConfigError, readLanggraphJson } from './config.ts';

export interface UiAsset {
  basename: string;
  contentType: string;
  contents: Uint8Array;
}

export interface UiBundle {
  /** The global the script assigns; the snippet of POST /ui calls its render(). */
  globalName: string;
  assets: UiAsset[];
}

export interface UiBundles {
  bundles: Map<string, UiBundle>;
  /** Graph id -> why its components could not be bundled. */
  failures: Record<string, string>;
}

export const NO_UI: UiBundles = { bundles: new Map(), failures: {} };

const uiSectionSchema = z.record(z.string().min(1), z.string().min(1));
const uiConfigSchema = z.looseObject({ shared: z.array(z.string().min(1)).optional() });

/** Modules the page provides (bootstrapUiContext), never bundled. */
const ALWAYS_EXTERNAL = ['react', 'react-dom', '@langchain/langgraph-sdk', '@langchain/langgraph-sdk/react-ui'];

/**
 * A JS identifier for any graph id: characters an identifier cannot hold become "_" ("agent-alias" is
 * `__LGUI_agent_alias`, the name the reference servers give it, which pages and tests may name). An id whose name
 * another entry of the same langgraph.json already took ("agent_alias" beside "agent-alias") is hex-encoded instead.
 */
export function uiGlobalName(graphId: string, taken: ReadonlySet<string> = new Set()): string {
  let name = `__LGUI_${graphId.replace(/[^\w$]/g, '_')}`;
  if (taken.has(name)) name = `__LGUI_x${Buffer.from(graphId).toString('hex')}`;
  while (taken.has(name)) name += '_';
  return name;
}

/** The virtual entry: imports the user's map and exports render(), which hands one component to the page. */
function entryPlugin(userFile: string): Plugin {
  const source = `import components from ${JSON.stringify(userFile)};
export function render(name, shadowRootId) {
  const host = document.getElementById(shadowRootId);
  const root = host && host.shadowRoot;
  if (!root) throw new Error("LoadExternalComponent: no shadow root " + shadowRootId);
  const component = components && components[name];
  if (!component) throw new Error("UI component not found: " + name);
  const target = document.createElement("div");
  root.appendChild(target);
  window[Symbol.for("LGUI_EXT_STORE")].respond(shadowRootId, component, target);
}
`;
  return {
    name: 'agentplane-ui-entry',
    setup(b) {
      b.onResolve({ filter: /^agentplane-ui-entry$/ }, () => ({ path: 'entry', namespace: 'agentplane-ui' }));
      b.onLoad({ filter: /.*/, namespace: 'agentplane-ui' }, () => ({
        contents: source,
        loader: 'js',
        resolveDir: path.dirname(userFile),
      }));
    },
  };
}

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

async function bundleOne(graphId: string, file: string, shared: string[], globalName: string): Promise<UiBundle> {
  // Loaded only for a project that has UI components: most agent servers start without esbuild.
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: ['agentplane-ui-entry'],
    entryNames: 'entrypoint',
    outdir: '/ui',
    write: false,
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    jsx: 'automatic',
    globalName,
    external: [...ALWAYS_EXTERNAL, ...shared],
    plugins: [entryPlugin(file)],
    logLevel: 'silent',
  });
  const encoder = new TextEncoder();
  const assets = result.outputFiles.map((f) => {
    const basename = path.basename(f.path);
    // External imports go through esbuild's require shim: point it at the page's module table instead.
    const contents = basename.endsWith('.js')
      ? encoder.encode(
          f.text.replaceAll(
            'typeof require !== "undefined" ? require',
            'typeof globalThis[Symbol.for("LGUI_REQUIRE")] !== "undefined" ? globalThis[Symbol.for("LGUI_REQUIRE")]',
          ),
        )
      : f.contents;
    return { basename, contents, contentType: CONTENT_TYPES[path.extname(basename)] ?? 'application/octet-stream' };
  });
  return { globalName, assets };
}

function describeBuildError(err: unknown): string {
  const errors = (
    err as { errors?: Array<{ text: string; location?: { file: string; line: number; column: number } | null }> }
  ).errors;
  if (Array.isArray(errors) && errors.length) {
    return errors
      .slice(0, 3)
      .map((e) => (e.location ? `${e.location.file}:${e.location.line}:${e.location.column}: ` : '') + e.text)
      .join('; ');
  }
  return (err as Error)?.message ?? String(err);
}

/**
 * Bundles every entry of langgraph.json "ui". A file that fails to bundle is logged and reported (by graph id) while
 * the rest are served; with `strict` it rejects instead, naming the file.
 */
export async function bundleUi(configPath: string, opts: { logger: Logger; strict?: boolean }): Promise<UiBundles> {
  const abs = path.resolve(configPath);
  const projectDir = path.dirname(abs);
  const json = (await readLanggraphJson(abs)) as Record<string, unknown>;
  if (json.ui === undefined) return NO_UI;
  const ui = uiSectionSchema.safeParse(json.ui);
  if (!ui.success)
    throw new GraphConfigError(`${abs}: "ui" must map graph ids to component files, e.g. {"agent": "./src/ui.tsx"}`);
  const cfg = uiConfigSchema.safeParse(json.ui_config ?? {});
  if (!cfg.success) throw new GraphConfigError(`${abs}: "ui_config.shared" must be a list of module names`);
  const shared = cfg.data.shared ?? [];
  const out: UiBundles = { bundles: new Map(), failures: {} };
  const names = new Set<string>();
  for (const [graphId, rel] of Object.entries(ui.data)) {
    const globalName = uiGlobalName(graphId, names);
    names.add(globalName);
    const file = path.resolve(projectDir, rel);
    try {
      if (path.relative(projectDir, file).startsWith('..'))
        throw new Error('the file must be inside the project folder');
      const bundle = await bundleOne(graphId, file, shared, globalName);
      out.bundles.set(graphId, bundle);
      opts.logger.info(
        { graph_id: graphId, ui: rel, assets: bundle.assets.map((a) => a.basename) },
        'ui components bundled',
      );
    } catch (err) {
      const message = `ui of graph "${graphId}": bundling ${rel} failed: ${describeBuildError(err)}`;
      if (opts.strict) throw new GraphConfigError(message);
      out.failures[graphId] = message;
      opts.logger.error({ graph_id: graphId, ui: rel }, message);
    }
  }
  return out;
}
