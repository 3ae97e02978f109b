// A deployment's editable settings. Says before saving whether the change builds a new revision (the API's rule:
// ref, config path, resources, access mode or secrets) or is kept for the next one (name, commands).
import { useState, type FormEvent } from 'react';
import { ApiError, type Api, type Deployment } from '../api.ts';
import {
  Field,
  ResourceFields,
  SecretRows,
  resourceSpecOf,
  resourcesFrom,
  type FieldErrors,
  type SecretRow,
} from '../form.tsx';
import { ErrorBanner } from '../ui.tsx';

export function Settings({
  api,
  dep,
  nextRevision,
  onSaved,
}: {
  api: Api;
  dep: Deployment;
  nextRevision: number;
  onSaved: (msg: string) => void;
}) {
  const initial = {
    name: dep.name,
    ref: dep.source_revision_config.repo_ref ?? '',
    configPath: dep.source_revision_config.graph_config_path ?? '',
    install: dep.source_config.install_command ?? '',
    build: dep.source_config.build_command ?? '',
    access: dep.source_config.access_mode,
    resources: resourcesFrom(dep.source_config.resource_spec),
  };
  const [form, setForm] = useState(initial);
  const [secrets, setSecrets] = useState<SecretRow[]>([]);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Said next to the Save button too: the page's notice is at its top, out of sight from here.
  const [saved, setSaved] = useState<string | null>(null);
  const set = (patch: Partial<typeof form>) => {
    setSaved(null);
    setForm((f) => ({ ...f, ...patch }));
  };

  const resourcesChanged =
    JSON.stringify(resourceSpecOf(form.resources) ?? {}) !== JSON.stringify(resourceSpecOf(initial.resources) ?? {});
  const secretRows = secrets.filter((s) => s.name || s.value);
  const revisionReasons = [
    form.ref !== initial.ref && 'git ref',
    form.configPath !== initial.configPath && 'langgraph.json path',
    form.access !== initial.access && 'access',
    resourcesChanged && 'resources',
    secretRows.length > 0 && 'secrets',
  ].filter(Boolean) as string[];
  const otherChanges = form.name !== initial.name || form.install !== initial.install || form.build !== initial.build;
  const dirty = revisionReasons.length > 0 || otherChanges;

  async function save(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setSaved(null);
    setError(null);
    setErrors({});
    const body: Record<string, unknown> = {};
    if (form.name !== initial.name) body.name = form.name;
    const sc: Record<string, unknown> = {};
    if (form.install !== initial.install) sc.install_command = form.install.trim() || null;
    if (form.build !== initial.build) sc.build_command = form.build.trim() || null;
    if (form.access !== initial.access) sc.access_mode = form.access;
    if (resourcesChanged) sc.resource_spec = resourceSpecOf(form.resources) ?? {};
    if (Object.keys(sc).length) body.source_config = sc;
    const src: Record<string, unknown> = {};
    if (form.ref !== initial.ref) src.repo_ref = form.ref;
    if (form.configPath !== initial.configPath) src.graph_config_path = form.configPath;
    if (Object.keys(src).length) body.source_revision_config = src;
    if (secretRows.length) body.secrets = secretRows;
    try {
      await api.patchDeployment(dep.id, body);
      setSecrets([]);
      const msg = revisionReasons.length
        ? `Saved: revision #${nextRevision} is being built.`
        : 'Saved: the next revision uses these settings.';
      setSaved(msg);
      onSaved(msg);
    } catch (err) {
      setError((err as Error).message);
      if (err instanceof ApiError) setErrors(err.fields);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form className="card form" onSubmit={save} noValidate aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <div className="grid2">
        <Field label="Name" errorKey="name" errors={errors}>
          <input name="name" value={form.name} onChange={(e) => set({ name: e.target.value })} />
        </Field>
        <Field label="Repository URL" errorKey="source_config.repo_url" errors={errors} hint="fixed once created">
          <input value={dep.source_config.repo_url ?? ''} readOnly />
        </Field>
        <Field label="Git ref" errorKey="source_revision_config.repo_ref" errors={errors}>
          <input name="repo_ref" value={form.ref} onChange={(e) => set({ ref: e.target.value })} />
        </Field>
        <Field label="langgraph.json path" errorKey="source_revision_config.graph_config_path" errors={errors}>
          <input
            name="graph_config_path"
            value={form.configPath}
            onChange={(e) => set({ configPath: e.target.value })}
          />
        </Field>
        <Field label="Install command" errorKey="source_config.install_command" errors={errors}>
          <input name="install_command" value={form.install} onChange={(e) => set({ install: e.target.value })} />
        </Field>
        <Field label="Build command" errorKey="source_config.build_command" errors={errors}>
          <input name="build_command" value={form.build} onChange={(e) => set({ build: e.target.value })} />
        </Field>
        <Field label="Who may call the agent" errorKey="source_config.access_mode" errors={errors}>
          <select
            name="access_mode"
            value={form.access}
            onChange={(e) => set({ access: e.target.value as 'api_key' | 'public' })}
          >
            <option value="api_key">API keys of this workspace</option>
            <option value="public">anyone (public)</option>
          </select>
        </Field>
      </div>
      <p className="muted">
        Secrets now: {dep.secrets.length ? dep.secrets.map((s) => s.name).join(', ') : 'none'}. Rows added below replace
        the whole set, so give every variable the agent needs.
      </p>
      <SecretRows rows={secrets} onChange={setSecrets} errors={errors} />
      <ResourceFields value={form.resources} onChange={(resources) => set({ resources })} errors={errors} />
      <ErrorBanner error={error} />
      <div className="actions">
        {saved && !dirty && (
          <span className="saved" role="status" data-testid="settings-saved">
            {saved}
          </span>
        )}
        {dirty && (
          <span className={revisionReasons.length ? 'will-build' : 'muted'} role="status">
            {revisionReasons.length
              ? `Saving creates revision #${nextRevision} (changed: ${revisionReasons.join(', ')}).`
              : 'Saving does not build: the next revision uses these settings.'}
          </span>
        )}
        <button
          type="button"
          className="secondary"
          disabled={!dirty || busy}
          onClick={() => {
            setForm(initial);
            setSecrets([]);
            setErrors({});
          }}
        >
          Reset
        </button>
        <button type="submit" disabled={!dirty || busy}>
          {revisionReasons.length ? `Save and build #${nextRevision}` : 'Save'}
        </button>
      </div>
    </form>
  );
}
