// Form pieces shared by the create form and the settings form: a labelled input with the API's message for its
// field, secret rows whose values are write-only, and the resource spec.
import type { ReactNode } from 'react';

export type FieldErrors = Record<string, string>;

export function Field({
  label,
  errorKey,
  errors,
  hint,
  children,
}: {
  label: string;
  errorKey: string;
  errors: FieldErrors;
  hint?: ReactNode;
  children: ReactNode;
}) {
  // Errors about anything under this field (e.g. resource_spec.max_scale under resource_spec) show here too.
  const messages = Object.entries(errors)
    .filter(([k]) => k === errorKey || k.startsWith(`${errorKey}.`))
    .map(([k, v]) => (k === errorKey ? v : `${k.slice(errorKey.length + 1)}: ${v}`));
  const id = `err-${errorKey.replace(/\W/g, '-')}`;
  return (
    <label className={messages.length ? 'invalid' : ''}>
      {label}
      {children}
      {hint && <small className="muted">{hint}</small>}
      {messages.length > 0 && (
        <small className="field-error" id={id} data-field={errorKey}>
          {messages.join('; ')}
        </small>
      )}
    </label>
  );
}

export type SecretRow = { name: string; value: string };

export function SecretRows({
  rows,
  onChange,
  errors,
}: {
  rows: SecretRow[];
  onChange: (rows: SecretRow[]) => void;
  errors: FieldErrors;
}) {
  const set = (i: number, patch: Partial<SecretRow>) =>
    onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <fieldset>
      <legend>Secrets</legend>
      <p className="muted">Environment variables of the agent. Values are write-only: they are never shown again.</p>
      {rows.map((r, i) => (
        <div className="secret-row" key={i}>
          <Field label="Name" errorKey={`secrets.${i}.name`} errors={errors}>
            <input
              value={r.name}
              onChange={(e) => set(i, { name: e.target.value })}
              placeholder="MY_SECRET"
              autoComplete="off"
            />
          </Field>
          <Field label="Value" errorKey={`secrets.${i}.value`} errors={errors}>
            <input
              type="password"
              value={r.value}
              onChange={(e) => set(i, { value: e.target.value })}
              autoComplete="new-password"
            />
          </Field>
          <button
            type="button"
            className="small secondary"
            aria-label={`Remove secret ${i + 1}`}
            onClick={() => onChange(rows.filter((_, j) => j !== i))}
          >
            Remove
          </button>
        </div>
      ))}
      <button type="button" className="small secondary" onClick={() => onChange([...rows, { name: '', value: '' }])}>
        Add secret
      </button>
    </fieldset>
  );
}

export type ResourceForm = { min_scale: string; max_scale: string; cpu: string; memory_mb: string };
export const EMPTY_RESOURCES: ResourceForm = { min_scale: '', max_scale: '', cpu: '', memory_mb: '' };

export function resourcesFrom(spec: Record<string, unknown> | null | undefined): ResourceForm {
  const s = (k: string) => (spec && spec[k] !== undefined ? String(spec[k]) : '');
  return { min_scale: s('min_scale'), max_scale: s('max_scale'), cpu: s('cpu'), memory_mb: s('memory_mb') };
}

/** Only the filled-in fields; a value that is not a number goes as a string so the API names it. */
export function resourceSpecOf(r: ResourceForm): Record<string, number | string> | undefined {
  const out: Record<string, number | string> = {};
  for (const [k, v] of Object.entries(r)) {
    const t = v.trim();
    if (t) out[k] = Number.isFinite(Number(t)) ? Number(t) : t;
  }
  return Object.keys(out).length ? out : undefined;
}

export function ResourceFields({
  value,
  onChange,
  errors,
}: {
  value: ResourceForm;
  onChange: (v: ResourceForm) => void;
  errors: FieldErrors;
}) {
  const input = (k: keyof ResourceForm, label: string, hint: string) => (
    <Field label={label} errorKey={`source_config.resource_spec.${k}`} errors={errors} hint={hint}>
      <input inputMode="decimal" value={value[k]} onChange={(e) => onChange({ ...value, [k]: e.target.value })} />
    </Field>
  );
  return (
    <fieldset>
      <legend>Resources</legend>
      <div className="grid4">
        {input('min_scale', 'Min replicas', 'e.g. 1')}
        {input('max_scale', 'Max replicas', 'e.g. 3')}
        {input('cpu', 'CPU (cores)', 'e.g. 0.5')}
        {input('memory_mb', 'Memory (MB)', 'e.g. 512')}
      </div>
    </fieldset>
  );
}
