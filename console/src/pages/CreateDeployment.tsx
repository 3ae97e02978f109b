import { useState, type FormEvent } from 'react';
import { ApiError, type Api } from '../api.ts';
import {
  EMPTY_RESOURCES,
  Field,
  ResourceFields,
  SecretRows,
  resourceSpecOf,
  type FieldErrors,
  type SecretRow,
} from '../form.tsx';
import { navigate } from '../router.ts';
import { ErrorBanner } from '../ui.tsx';

export function CreateDeployment({ api }: { api: Api }) {
  const [name, setName] = useState('');
  const [repoUrl, setRepoUrl] = useState('');
  const [ref, setRef] = useState('main');
  const [configPath, setConfigPath] = useState('langgraph.json');
  const [install, setInstall] = useState('');
  const [build, setBuild] = useState('');
  const [access, setAccess] = useState<'api_key' | 'public'>('api_key');
  const [secrets, setSecrets] = useState<SecretRow[]>([]);
  const [resources, setResources] = useState(EMPTY_RESOURCES);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setErrors({});
    try {
      const dep = await api.createDeployment({
        name,
        source: 'github',
        source_config: {
          repo_url: repoUrl,
          install_command: install.trim() || undefined,
          build_command: build.trim() || undefined,
          access_mode: access,
          resource_spec: resourceSpecOf(resources),
        },
        source_revision_config: { repo_ref: ref, graph_config_path: configPath },
        secrets: secrets.filter((s) => s.name || s.value),
      });
      setSecrets([]);
      navigate({ page: 'deployment', id: dep.id });
    } catch (err) {
      setError((err as Error).message);
      if (err instanceof ApiError) setErrors(err.fields);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section>
      <h1>New deployment</h1>
      <form onSubmit={submit} className="card form" noValidate>
        <Field label="Name" errorKey="name" errors={errors}>
          <input
            name="name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="hello"
            autoComplete="off"
          />
        </Field>
        <Field
          label="Repository URL"
          errorKey="source_config.repo_url"
          errors={errors}
          hint="https://… or a local path the platform allows"
        >
          <input name="repo_url" value={repoUrl} onChange={(e) => setRepoUrl(e.target.value)} autoComplete="off" />
        </Field>
        <div className="grid2">
          <Field
            label="Git ref"
            errorKey="source_revision_config.repo_ref"
            errors={errors}
            hint="branch, tag or commit"
          >
            <input name="repo_ref" value={ref} onChange={(e) => setRef(e.target.value)} />
          </Field>
          <Field label="langgraph.json path" errorKey="source_revision_config.graph_config_path" errors={errors}>
            <input name="graph_config_path" value={configPath} onChange={(e) => setConfigPath(e.target.value)} />
          </Field>
          <Field
            label="Install command"
            errorKey="source_config.install_command"
            errors={errors}
            hint="default: npm ci (or the lock file's tool)"
          >
            <input name="install_command" value={install} onChange={(e) => setInstall(e.target.value)} />
          </Field>
          <Field label="Build command" errorKey="source_config.build_command" errors={errors} hint="optional">
            <input name="build_command" value={build} onChange={(e) => setBuild(e.target.value)} />
          </Field>
          <Field label="Who may call the agent" errorKey="source_config.access_mode" errors={errors}>
            <select
              name="access_mode"
              value={access}
              onChange={(e) => setAccess(e.target.value as 'api_key' | 'public')}
            >
              <option value="api_key">API keys of this workspace</option>
              <option value="public">anyone (public)</option>
            </select>
          </Field>
        </div>
        <SecretRows rows={secrets} onChange={setSecrets} errors={errors} />
        <ResourceFields value={resources} onChange={setResources} errors={errors} />
        <ErrorBanner error={error} />
        <div className="actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Creating…' : 'Create deployment'}
          </button>
        </div>
      </form>
    </section>
  );
}
